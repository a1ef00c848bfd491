// Runs one chat-completions call per message for llm.js, then wakes the waiting thread. The
// behaviour is the Rust host's (host/lib/src/openai.rs), pinned by tests/conformance/llm.json.
import { parentPort } from 'node:worker_threads';
import { LLM_DEFAULTS } from './defaults.js';
import { redact } from './llm.js';

const excerpt = (text) => JSON.stringify(String(text).slice(0, 200));
const endpoint = (url) => {
  const base = url.replace(/\/+$/, '');
  return base.endsWith('/chat/completions') ? base : `${base}/chat/completions`;
};

function body(config, r, jsonMode) {
  const b = {
    model: config.models?.[r.operation] || config.model,
    messages: [
      { role: 'system', content: r.system },
      { role: 'user', content: r.prompt },
    ],
    max_tokens: r.maxTokens,
    temperature: r.temperature,
  };
  if (r.jsonSchema !== undefined && r.jsonSchema !== null) {
    if (jsonMode === 'json_schema') {
      let schema;
      try {
        schema = JSON.parse(r.jsonSchema);
      } catch {
        schema = undefined;
      }
      if (schema !== undefined) {
        b.response_format = { type: 'json_schema', json_schema: { name: r.operation, schema, strict: false } };
      }
    } else if (jsonMode === 'json_object') {
      b.response_format = { type: 'json_object' };
    }
  }
  return b;
}

export async function complete(config, r) {
  const url = endpoint(config.url);
  const shown = redact(url);
  let jsonMode = config.jsonMode;
  const headers = { 'Content-Type': 'application/json' };
  if (config.apiKey) headers.Authorization = `Bearer ${config.apiKey}`;
  // The importance score is optional (the rules decide without it): one try.
  const retries = r.operation === 'importance' ? 0 : config.retries;
  let attempt = 0;
  for (;;) {
    let res;
    let text;
    let message;
    try {
      res = await fetch(url, {
        method: 'POST',
        headers,
        body: JSON.stringify(body(config, r, jsonMode)),
        signal: AbortSignal.timeout(config.timeoutMs),
      });
      text = await res.text();
    } catch (e) {
      const timedOut = e.name === 'TimeoutError' || e.cause?.name === 'TimeoutError';
      const detail = timedOut
        ? `no answer within the timeout of ${config.timeoutMs} ms (HINDSIGHT_LLM_TIMEOUT_MS)`
        : e.cause?.message || e.message;
      message = `${shown}: ${detail}`;
    }
    let wait;
    if (message === undefined) {
      if (res.ok) return answer(text, r.maxTokens, r.jsonSchema !== undefined && r.jsonSchema !== null);
      if (res.status === 400 && jsonMode !== 'none' && /response_format|json_schema/.test(text)) {
        jsonMode = 'none'; // a server that does not take it: ask again without
        continue;
      }
      message = `HTTP ${res.status} from ${shown}: ${excerpt(text)}`;
      if (res.status !== 429 && res.status < 500) throw new Error(message);
      const retryAfter = Number(res.headers.get('retry-after'));
      if (res.headers.has('retry-after') && Number.isFinite(retryAfter) && retryAfter >= 0) wait = retryAfter * 1000;
    }
    if (attempt >= retries) {
      throw new Error(`${message} (after ${attempt === 0 ? '1 try' : `${attempt + 1} tries`})`);
    }
    const backoff = config.backoffMs ?? LLM_DEFAULTS.backoffMs;
    await new Promise((ok) => setTimeout(ok, Math.min(wait ?? backoff * 2 ** attempt, LLM_DEFAULTS.maxBackoffMs)));
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
  const choice = completion?.choices?.[0];
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

parentPort?.on('message', async ({ config, request, signal, port }) => {
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
