// hindsight in Node.js: the component the Rust host builds, transpiled by jco.
//
//   const hs = await Hindsight.open({ db: 'memory.db' });
//   const bank = hs.bank('agent');
//   bank.retain(['Large JSON logs parse with ijson streaming']);
//   for (const item of bank.recall('parse a huge JSON log', { k: 3 }).items)
//     console.log(item.score.total, item.memory.content);
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import * as shim from '@bytecodealliance/preview2-shim';
import { instantiate } from '../generated/hindsight.js';
import { OpenAiLlm, llmConfigFromEnv } from './llm.js';
import { modelsDir, wasmPath } from './paths.js';
import { Conflict, SqliteStore } from './store.js';

/**
 * An error the engine returned: `kind` is the WIT variant (invalid-input, not-found, …), or `trap`.
 * For invalid-input, `field` names the field and `item` the batch index (when there was a batch).
 */
export class HindsightError extends Error {
  constructor(kind, message, { item, field } = {}) {
    super(`${kind}: ${message}`);
    this.name = 'HindsightError';
    this.kind = kind;
    this.detail = message;
    this.item = item;
    this.field = field;
  }

  /** From a WIT `error` variant: invalid-input carries a `field-error` record. */
  static fromWit({ tag, val }) {
    if (tag === 'invalid-input' && val && typeof val === 'object') {
      const item = val.item === undefined || val.item === null ? undefined : Number(val.item);
      const where = item === undefined ? '' : `items[${item}].`;
      return new HindsightError(tag, `${where}${val.field}: ${val.message}`, { item, field: val.field });
    }
    return new HindsightError(tag, val);
  }
}

/** WASI for the guest: clocks and randomness; no preopened directory, no environment. */
function wasiImports() {
  const { cli, clocks, filesystem, io, random } = shim;
  const wasi = {
    'wasi:cli/environment': { ...cli.environment, getEnvironment: () => [], getArguments: () => [] },
    'wasi:cli/exit': cli.exit,
    'wasi:cli/stderr': cli.stderr,
    'wasi:cli/stdin': cli.stdin,
    'wasi:cli/stdout': cli.stdout,
    'wasi:cli/terminal-input': cli.terminalInput,
    'wasi:cli/terminal-output': cli.terminalOutput,
    'wasi:cli/terminal-stderr': cli.terminalStderr,
    'wasi:cli/terminal-stdin': cli.terminalStdin,
    'wasi:cli/terminal-stdout': cli.terminalStdout,
    'wasi:clocks/monotonic-clock': clocks.monotonicClock,
    'wasi:clocks/wall-clock': clocks.wallClock,
    'wasi:filesystem/preopens': { getDirectories: () => [] },
    'wasi:filesystem/types': filesystem.types,
    'wasi:io/error': io.error,
    'wasi:io/poll': io.poll,
    'wasi:io/streams': io.streams,
    'wasi:random/insecure-seed': random.insecureSeed,
    'wasi:random/random': random.random,
  };
  return wasi;
}

/** Store errors reach the guest as its `store` error, not as a trap. */
function storeImports(store) {
  const guarded = (what, f) => (...args) => {
    try {
      return f(...args);
    } catch (e) {
      throw { payload: { tag: 'failed', val: `${what}: ${e.message}` } };
    }
  };
  return {
    get: guarded('get', (key) => store.get(key)),
    scan: guarded('scan', (prefix, after, limit) => store.scan(prefix, after, limit)),
    commit: (ops) => {
      try {
        store.commit(ops);
      } catch (e) {
        throw { payload: { tag: e instanceof Conflict ? 'conflict' : 'failed', val: e.message } };
      }
    },
  };
}

/** Timestamps and counters come back as BigInt (s64/u64): numbers are easier and exact for them. */
function plain(value) {
  if (typeof value === 'bigint') return Number(value);
  if (Array.isArray(value)) return value.map(plain);
  if (value instanceof Float32Array || value instanceof Uint8Array) return value;
  if (value && typeof value === 'object' && value.constructor === Object) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, plain(v)]));
  }
  return value;
}

const ts = (ms) => (ms === undefined || ms === null ? undefined : BigInt(ms));

const NEW_MEMORY_DEFAULTS = { tags: [], metadata: [], force: false, parallel: false, sequence: false };
const NEW_MEMORY_FIELDS = new Set([
  'content', 'kind', 'taskType', 'taskDescription', 'context', 'tags', 'scope', 'agentId', 'importance',
  'confidence', 'source', 'failureType', 'occurredAt', 'validUntil', 'metadata', 'force', 'parallel', 'sequence', 'vector',
]);
const RECALL_OPTIONS = new Set([
  'k', 'now', 'taskType', 'kinds', 'tags', 'scope', 'minScore', 'promptTokens', 'vector', 'includeSuperseded',
]);

function newMemory(item) {
  const fields = typeof item === 'string' ? { content: item } : { ...item };
  for (const key of Object.keys(fields)) {
    if (!NEW_MEMORY_FIELDS.has(key)) throw new HindsightError('invalid-input', `unknown memory field ${key}`);
  }
  if (typeof fields.content !== 'string') throw new HindsightError('invalid-input', 'content: missing');
  if (fields.metadata && !Array.isArray(fields.metadata)) fields.metadata = Object.entries(fields.metadata);
  if (fields.vector) fields.vector = Float32Array.from(fields.vector);
  return { ...NEW_MEMORY_DEFAULTS, ...fields, occurredAt: ts(fields.occurredAt), validUntil: ts(fields.validUntil) };
}

export class Hindsight {
  /**
   * @param {object} options
   * @param {string} options.db SQLite file (created when missing)
   * @param {string} [options.models] directory with model.onnx and tokenizer.json
   * @param {string} [options.wasm] the component (default: the repository's build)
   * @param {object|null} [options.llm] `{url, model, apiKey, timeoutMs, retries}`; default from HINDSIGHT_LLM_*
   * @param {string} [options.settings] engine settings, JSON text
   */
  static async open({ db, models = modelsDir(), wasm = wasmPath(), llm = llmConfigFromEnv(), settings = '' }) {
    const [model, tokenizer] = await Promise.all([
      readFile(join(models, 'model.onnx')),
      readFile(join(models, 'tokenizer.json')),
    ]);
    const hs = new Hindsight(new SqliteStore(db), new OpenAiLlm(llm), model, tokenizer, settings);
    await hs.instantiate();
    return hs;
  }

  constructor(store, llm, model, tokenizer, settings) {
    this.store = store;
    this.llm = llm;
    this.model = new Uint8Array(model);
    this.tokenizer = new Uint8Array(tokenizer);
    this.settings = settings;
    this.engine = null;
    this.banks = new Map();
    this.modules = new Map();
  }

  async instantiate() {
    const generated = new URL('../generated/', import.meta.url);
    const imports = {
      ...wasiImports(),
      'hindsight:memory/store': storeImports(this.store),
      'hindsight:memory/llm': { complete: (request) => this.llm.complete(request) },
    };
    const root = await instantiate(async (path) => {
      if (!this.modules.has(path)) this.modules.set(path, await WebAssembly.compile(await readFile(new URL(path, generated))));
      return this.modules.get(path);
    }, imports);
    this.api = root.api;
    this.engine = null;
    this.banks.clear();
  }

  /** Runs `f`, turning WIT errors and traps into HindsightError. */
  call(f) {
    if (!this.api) throw new HindsightError('trap', 'the instance trapped; call reset() to start a new one from the store');
    try {
      this.engine ??= this.api.Engine.create(this.model, this.tokenizer, this.settings);
      return plain(f(this.engine));
    } catch (e) {
      if (e && e.payload && typeof e.payload.tag === 'string') throw HindsightError.fromWit(e.payload);
      if (e instanceof HindsightError) throw e;
      // A trap (unreachable, out of bounds, stack overflow): this instance cannot be used again.
      this.api = null;
      throw new HindsightError('trap', e?.message ?? String(e));
    }
  }

  /** A fresh instance after a trap; everything acknowledged is in the store. */
  async reset() {
    await this.instantiate();
  }

  bank(id) {
    return new Bank(this, id);
  }

  bankHandle(id) {
    if (!this.banks.has(id)) this.banks.set(id, this.call((engine) => engine.openBank(id)));
    return this.banks.get(id);
  }

  modelId() {
    return this.call((engine) => engine.modelId());
  }

  embed(texts) {
    return this.call((engine) => engine.embed(texts));
  }

  close() {
    this.llm.close();
    this.store.close();
  }
}

/** One memory bank: `retain`, `recall` and the rest of the WIT `bank` resource. */
export class Bank {
  constructor(hindsight, id) {
    this.hs = hindsight;
    this.id = id;
  }

  #call(f) {
    const handle = this.hs.bankHandle(this.id);
    return this.hs.call(() => f(handle));
  }

  /** Stores memories: text, or objects with the WIT `new-memory` fields in camelCase. */
  retain(items, { now } = {}) {
    const memories = items.map(newMemory);
    return this.#call((b) => b.retain(memories, ts(now)));
  }

  /** The memories that matter for `query`, best first, and a prompt block. */
  recall(query, options = {}) {
    for (const key of Object.keys(options)) {
      if (!RECALL_OPTIONS.has(key)) throw new HindsightError('invalid-input', `unknown recall option ${key}`);
    }
    const q = { kinds: [], tags: [], includeSuperseded: false, ...options, query, now: ts(options.now) };
    if (q.vector) q.vector = Float32Array.from(q.vector);
    return this.#call((b) => b.recall(q));
  }

  get(id) {
    return this.#call((b) => b.get(id));
  }

  forget(id, { hard = false, now } = {}) {
    return this.#call((b) => b.forget(id, hard, ts(now)));
  }

  restore(id, { now } = {}) {
    return this.#call((b) => b.restore(id, ts(now)));
  }

  /** Undoes a wrong supersede: active again, kept beside the memory that replaced it. */
  unsupersede(id, { now } = {}) {
    return this.#call((b) => b.unsupersede(id, ts(now)));
  }

  stats() {
    return this.#call((b) => b.stats());
  }

  /** `outcome`: success, failure or correction. */
  feedback(ids, outcome, { now } = {}) {
    return this.#call((b) => b.feedback(ids, outcome, ts(now)));
  }

  history(id) {
    return this.#call((b) => b.history(id));
  }

  maintain({ now, dryRun = false } = {}) {
    return this.#call((b) => b.maintain(ts(now), dryRun));
  }
}
