// The `hindsight:memory/llm` import: an OpenAI-compatible chat-completions client on fetch.
//
// Component imports are synchronous in jco on Node 20 (no JSPI), and fetch is not: the request
// runs in a worker thread while this thread waits on Atomics.wait. The event loop is blocked for
// the call's duration, as the Rust host's thread is.
import { MessageChannel, Worker, receiveMessageOnPort } from 'node:worker_threads';

/** From HINDSIGHT_LLM_URL, _MODEL, _API_KEY, _TIMEOUT_MS, _RETRIES, as the Rust host reads them; null without a URL. */
export function llmConfigFromEnv(env = process.env) {
  const v = (name) => (env[name] || '').trim() || undefined;
  const url = v('HINDSIGHT_LLM_URL');
  if (!url) return null;
  return {
    url,
    model: v('HINDSIGHT_LLM_MODEL') || 'default',
    apiKey: v('HINDSIGHT_LLM_API_KEY'),
    timeoutMs: Number(v('HINDSIGHT_LLM_TIMEOUT_MS') || 30_000),
    retries: Number(v('HINDSIGHT_LLM_RETRIES') || 2),
  };
}

export class OpenAiLlm {
  constructor(config) {
    this.config = config;
    this.worker = null;
  }

  /** A WIT `llm.complete`: the response, or a thrown `{payload: {tag: 'unavailable' | 'failed', val}}`. */
  complete(request) {
    if (!this.config) {
      throw { payload: { tag: 'unavailable', val: 'no language model configured (set HINDSIGHT_LLM_URL)' } };
    }
    if (!this.worker) {
      this.worker = new Worker(new URL('./llm-worker.js', import.meta.url));
      this.worker.unref();
    }
    const signal = new Int32Array(new SharedArrayBuffer(4));
    const { port1, port2 } = new MessageChannel();
    this.worker.postMessage({ config: this.config, request, signal, port: port2 }, [port2]);
    Atomics.wait(signal, 0, 0);
    const answer = receiveMessageOnPort(port1).message;
    port1.close();
    if (answer.error) throw { payload: { tag: 'failed', val: answer.error } };
    return answer.response;
  }

  close() {
    this.worker?.terminate();
    this.worker = null;
  }
}
