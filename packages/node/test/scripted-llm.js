// A local OpenAI-compatible server with scripted answers, in a worker thread: the host blocks
// its own thread during an LLM call, so the server cannot share it.
//
// An answer is [status, content]: content is the reply's text, or (status 200) an object with
// the message's fields, e.g. { tool_calls: [{ id, type: 'function', function: { name, arguments } }] }.
// A request with `stream: true` gets the answer as server-sent events.
//
// In the worker it serves; imported, `scriptedServer()` starts it and returns { url, script, requests, received, close }.
import { createServer } from 'node:http';
import { Worker, isMainThread, parentPort } from 'node:worker_threads';

/** Starts the server in a worker: `script(answers)` sets the next answers; `requests` collects the bodies received. */
export async function scriptedServer() {
  const worker = new Worker(new URL(import.meta.url));
  const requests = [];
  const message = (pred) =>
    new Promise((ok) => {
      const on = (m) => {
        if (pred(m)) {
          worker.off('message', on);
          ok(m);
        }
      };
      worker.on('message', on);
    });
  worker.on('message', (m) => m.request && requests.push(m.request));
  const { port } = await message((m) => m.port);
  return {
    url: `http://127.0.0.1:${port}/v1`,
    requests,
    async script(answers) {
      const done = message((m) => m.scripted);
      worker.postMessage({ answers });
      await done;
    },
    /** The requests, once `n` have arrived (a request's message may come after its answer). */
    async received(n) {
      while (requests.length < n) await new Promise((ok) => setTimeout(ok, 5));
      return requests;
    },
    close: () => worker.terminate(),
  };
}

let answers = [];
const usage = { prompt_tokens: 50, completion_tokens: 10, total_tokens: 60 };

function reply(content) {
  const message = typeof content === 'string' ? { role: 'assistant', content } : { role: 'assistant', content: null, ...content };
  return { message, finish_reason: message.tool_calls?.length ? 'tool_calls' : 'stop' };
}

function stream(res, content) {
  const { message, finish_reason } = reply(content);
  const base = { id: 'scripted', object: 'chat.completion.chunk', created: 0, model: 'scripted' };
  const send = (data) => res.write(`data: ${JSON.stringify(data)}\n\n`);
  res.writeHead(200, { 'Content-Type': 'text/event-stream' });
  const delta = { role: 'assistant' };
  if (message.content) delta.content = message.content;
  if (message.tool_calls) delta.tool_calls = message.tool_calls.map((c, index) => ({ index, ...c }));
  send({ ...base, choices: [{ index: 0, delta, finish_reason: null }] });
  send({ ...base, choices: [{ index: 0, delta: {}, finish_reason }], usage });
  res.end('data: [DONE]\n\n');
}

const server = isMainThread ? null : createServer((req, res) => {
  let body = '';
  req.on('data', (c) => (body += c));
  req.on('end', () => {
    const request = JSON.parse(body);
    parentPort.postMessage({ request });
    const [status, content] = answers.shift() ?? [500, 'no scripted answer'];
    if (status === 200 && request.stream) return stream(res, content);
    res.writeHead(status, { 'Content-Type': 'application/json' });
    res.end(
      status === 200
        ? JSON.stringify({ choices: [{ index: 0, ...reply(content) }], usage })
        : JSON.stringify({ error: content }),
    );
  });
});
parentPort?.on('message', (m) => {
  if (m.answers) {
    answers = m.answers;
    parentPort.postMessage({ scripted: true });
  } else if (m.close) {
    server.close();
    parentPort.close();
  }
});
server?.listen(0, '127.0.0.1', () => parentPort.postMessage({ port: server.address().port }));
