// The `hindsight:memory/llm` import: an OpenAI-compatible chat-completions client on fetch.
//
// Component imports are synchronous in jco on Node 20 (no JSPI), and fetch is not: the request
// runs in a worker thread while this thread waits on Atomics.wait. The event loop is blocked for
// the call's duration, as the Rust host's thread is.
import { MessageChannel, Worker, receiveMessageOnPort } from 'node:worker_threads';
import { ENV, JSON_MODES, LLM_DEFAULTS, OPERATIONS } from './defaults.js';

/** A malformed LLM setting: names the variable or option. */
export class LlmConfigError extends Error {
  constructor(field, message) {
    super(`${field}: ${message}`);
    this.name = 'LlmConfigError';
    this.field = field;
  }
}

const number = (field, value) => {
  const n = Number(value);
  if (!Number.isFinite(n) || n < 0 || String(value).trim() === '') throw new LlmConfigError(field, `${JSON.stringify(value)} is not a number`);
  return n;
};

/**
 * A full client config from partial options: `{url, model, apiKey, models: {operation: model},
 * timeoutMs, retries, backoffMs, jsonMode}`. Checks the URL and every value, naming the bad one.
 */
export function llmConfig(options) {
  const given = Object.fromEntries(Object.entries(options || {}).filter(([, v]) => v !== undefined && v !== null));
  const config = { ...LLM_DEFAULTS, models: {}, ...given };
  const url = String(config.url || '').trim();
  if (!/^https?:\/\/[^/\s]/.test(url)) {
    throw new LlmConfigError('llm url', `${JSON.stringify(redact(url))} is not an http(s) URL, e.g. http://127.0.0.1:8080/v1`);
  }
  if (!JSON_MODES.includes(config.jsonMode)) {
    throw new LlmConfigError('jsonMode', `${JSON.stringify(config.jsonMode)}: expected ${JSON_MODES.join(', ')}`);
  }
  for (const op of Object.keys(config.models)) {
    if (!OPERATIONS.includes(op)) throw new LlmConfigError('models', `unknown operation ${op}: expected ${OPERATIONS.join(', ')}`);
  }
  config.timeoutMs = number('timeoutMs', config.timeoutMs);
  config.retries = number('retries', config.retries);
  config.backoffMs = number('backoffMs', config.backoffMs);
  return { ...config, url };
}

/** From HINDSIGHT_LLM_* as the Rust host reads them; null without a URL. A bad value names its variable. */
export function llmConfigFromEnv(env = process.env) {
  const v = (name) => (env[name] || '').trim() || undefined;
  const url = v(ENV.llmUrl);
  if (!url) return null;
  const options = { url, model: v(ENV.llmModel) || LLM_DEFAULTS.model, apiKey: v(ENV.llmApiKey), models: {} };
  for (const op of OPERATIONS) {
    const model = v(`${ENV.llmModelPrefix}${op.toUpperCase()}`);
    if (model) options.models[op] = model;
  }
  const named = (name, key, parse) => {
    const value = v(name);
    if (value === undefined) return;
    try {
      options[key] = parse(value);
    } catch (e) {
      throw new LlmConfigError(name, e.message.replace(/^[^:]*: /, ''));
    }
  };
  named(ENV.llmTimeoutMs, 'timeoutMs', (x) => number(ENV.llmTimeoutMs, x));
  named(ENV.llmRetries, 'retries', (x) => number(ENV.llmRetries, x));
  named(ENV.llmJsonMode, 'jsonMode', (x) => {
    if (!JSON_MODES.includes(x)) throw new LlmConfigError(ENV.llmJsonMode, `${JSON.stringify(x)}: expected ${JSON_MODES.join(', ')}`);
    return x;
  });
  return llmConfig(options);
}

/** `http://user:secret@host/…` → `http://host/…`: credentials never reach a message. */
export function redact(url) {
  return String(url).replace(/^([a-z]+:\/\/)[^/@]*@/i, '$1');
}

export class OpenAiLlm {
  /** `config`: as llmConfig takes it, or null for no LLM. */
  constructor(config) {
    this.config = config ? llmConfig(config) : null;
    this.worker = null;
  }

  /** A WIT `llm.complete`: the response, or a thrown `{payload: {tag: 'unavailable' | 'failed', val}}`. */
  complete(request) {
    if (!this.config) {
      throw { payload: { tag: 'unavailable', val: `no language model is configured (set ${ENV.llmUrl}, or pass one to the host)` } };
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
