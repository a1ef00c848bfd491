// A local OpenAI-compatible server with scripted answers, in a worker thread: the host blocks
// its own thread during an LLM call, so the server cannot share it.
import { createServer } from 'node:http';
import { parentPort } from 'node:worker_threads';

let answers = [];
const server = createServer((req, res) => {
  let body = '';
  req.on('data', (c) => (body += c));
  req.on('end', () => {
    parentPort.postMessage({ request: JSON.parse(body) });
    const [status, content] = answers.shift() ?? [500, 'no scripted answer'];
    res.writeHead(status, { 'Content-Type': 'application/json' });
    res.end(
      status === 200
        ? JSON.stringify({
            choices: [{ message: { role: 'assistant', content }, finish_reason: 'stop' }],
            usage: { prompt_tokens: 50, completion_tokens: 10 },
          })
        : JSON.stringify({ error: content }),
    );
  });
});
parentPort.on('message', (m) => {
  if (m.answers) {
    answers = m.answers;
    parentPort.postMessage({ scripted: true });
  } else if (m.close) {
    server.close();
    parentPort.close();
  }
});
server.listen(0, '127.0.0.1', () => parentPort.postMessage({ port: server.address().port }));
