// Runs one chat-completions call per message for llm.js, then wakes the waiting thread.
import { parentPort } from 'node:worker_threads';

const excerpt = (text) => JSON.stringify(String(text).slice(0, 200));
const endpoint = (url) => {
  const base = url.replace(/\/+$/, '');
  return base.endsWith('/chat/completions') ? base : `${base}/chat/completions`;
};

async function complete(config, r) {
  const url = endpoint(config.url);
  const body = {
    model: config.model,
    messages: [
      { role: 'system', content: r.system },
      { role: 'user', content: r.prompt },
    ],
    max_tokens: r.maxTokens,
    temperature: r.temperature,
  };
  if (r.jsonSchema !== undefined) {
    body.response_format = {
      type: 'json_schema',
      json_schema: { name: r.operation, schema: JSON.parse(r.jsonSchema), strict: false },
    };
  }
  const headers = { 'Content-Type': 'application/json' };
  if (config.apiKey) headers.Authorization = `Bearer ${config.apiKey}`;
  let attempt = 0;
  for (;;) {
    let res;
    let text;
    let message;
    try {
      res = await fetch(url, {
        method: 'POST',
        headers,
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(config.timeoutMs),
      });
      text = await res.text();
    } catch (e) {
      message = `${url}: ${e.cause?.message || e.message}`;
    }
    let wait;
    if (message === undefined) {
      if (res.ok) return answer(text, r.maxTokens, r.jsonSchema !== undefined);
      if (res.status === 400 && body.response_format && /response_format|json_schema/.test(text)) {
        delete body.response_format; // a server that does not take it: ask again without
        continue;
      }
      message = `HTTP ${res.status} from ${url}: ${excerpt(text)}`;
      if (res.status !== 429 && res.status < 500) throw new Error(message);
      const retryAfter = Number(res.headers.get('retry-after'));
      if (res.headers.has('retry-after') && Number.isFinite(retryAfter)) wait = retryAfter * 1000;
    }
    if (attempt >= config.retries) throw new Error(`${message} (after ${attempt + 1} tries)`);
    await new Promise((ok) => setTimeout(ok, Math.min(wait ?? 500 * 2 ** attempt, 8000)));
    attempt++;
  }
}

function answer(text, maxTokens, wantsJson) {
  let completion;
  try {
    completion = JSON.parse(text);
  } catch (e) {
    throw new Error(`the answer is not a chat completion (${e.message}): ${excerpt(text)}`);
  }
  const choice = completion.choices?.[0];
  if (!choice) throw new Error('the answer has no choices');
  let content = choice.message?.content || '';
  if (!content.trim()) content = choice.message?.reasoning_content || '';
  if (choice.finish_reason === 'length' && wantsJson) {
    throw new Error(`the model's answer was cut off at max_tokens=${maxTokens} (finish_reason "length"): ${excerpt(content)}`);
  }
  if (!content.trim()) throw new Error("the model's answer is empty");
  const usage = completion.usage || {};
  return { text: content, promptTokens: usage.prompt_tokens || 0, completionTokens: usage.completion_tokens || 0 };
}

parentPort.on('message', async ({ config, request, signal, port }) => {
  let reply;
  try {
    reply = { response: await complete(config, request) };
  } catch (e) {
    reply = { error: e.message };
  }
  port.postMessage(reply);
  port.close();
  Atomics.store(signal, 0, 1);
  Atomics.notify(signal, 0);
});
