// hindsight in Node.js: the component the Rust host builds, transpiled by jco.
//
//   const hs = await Hindsight.open({ db: 'memory.db' });
//   const bank = hs.bank('agent');
//   bank.retain(['Large JSON logs parse with ijson streaming']);
//   for (const item of bank.recall({ query: 'parse a huge JSON log', k: 3 }).items)
//     console.log(item.score.total, item.memory.content);
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import * as shim from '@bytecodealliance/preview2-shim';
import { instantiate } from '../generated/hindsight.js';
import { modelsDir } from './defaults.js';
import { OpenAiLlm, llmConfigFromEnv } from './llm.js';
import { Conflict, SqliteStore } from './store.js';

export { LlmConfigError, llmConfig, llmConfigFromEnv } from './llm.js';
export { modelsDir } from './defaults.js';

/**
 * An error the engine returned: `kind` is the WIT variant (invalid-input, not-found, …), or `trap`.
 * For invalid-input, `field` names the field and `item` the batch index (when there was a batch).
 */
export class HindsightError extends Error {
  constructor(kind, message, { item, field, what, id } = {}) {
    super(`${kind}: ${message}`);
    this.name = 'HindsightError';
    this.kind = kind;
    this.detail = message;
    this.item = item;
    this.field = field;
    this.what = what;
    this.id = id;
  }

  /**
   * From a WIT `error` variant: invalid-input carries a `field-error` record, not-found a
   * `missing` record (what and which id).
   */
  static fromWit({ tag, val }) {
    if (tag === 'not-found' && val && typeof val === 'object') {
      return new HindsightError(tag, val.message, { what: val.what, id: val.id });
    }
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

/** A time as the WIT wants it: milliseconds since the epoch (a number, a Date or undefined). */
const ts = (t) => (t === undefined || t === null ? undefined : BigInt(t instanceof Date ? t.getTime() : t));

const NEW_MEMORY_DEFAULTS = { tags: [], metadata: [], force: false, parallel: false, sequence: false };
const NEW_MEMORY_FIELDS = new Set([
  'content', 'kind', 'taskType', 'taskDescription', 'context', 'tags', 'scope', 'agentId', 'importance',
  'confidence', 'source', 'failureType', 'occurredAt', 'validUntil', 'metadata', 'force', 'parallel', 'sequence', 'vector',
]);
const RECALL_OPTIONS = new Set([
  'query', 'k', 'now', 'taskType', 'kinds', 'tags', 'scope', 'minScore', 'promptTokens', 'vector', 'includeSuperseded',
  'agentId', 'taskId', 'trustedOnly', 'asOf',
]);
const LIST_OPTIONS = new Set(['kind', 'status', 'tag', 'taskType', 'source', 'text', 'order', 'limit', 'cursor']);
const STEP_FIELDS = new Set(['type', 'text', 'tool', 'error', 'id', 'now']);
const TASK_FIELDS = new Set(['goal', 'taskType', 'agentId', 'now']);
const TRAJECTORY_FIELDS = new Set(['goal', 'taskType', 'agentId', 'steps', 'facts', 'outcome', 'detail', 'force']);

/** The WIT `step` from `{type, text, tool, error, id, now}`. */
const STEP_KINDS = ['thought', 'tool-call', 'tool-result', 'user-message', 'answer'];

function witStep(step) {
  checkFields('step field', step, STEP_FIELDS);
  const { type, text, tool, error = false, id, now } = step;
  if (!STEP_KINDS.includes(type)) {
    throw new HindsightError('invalid-input', `type: ${JSON.stringify(type)} is not a step type; expected one of ${STEP_KINDS.join(', ')}`, { field: 'type' });
  }
  if (typeof text !== 'string') throw new HindsightError('invalid-input', 'text: a step needs its text', { field: 'text' });
  return { id, at: ts(now ?? Date.now()), kind: type, text, tool, error };
}

function checkFields(what, object, allowed) {
  for (const key of Object.keys(object)) {
    if (!allowed.has(key)) {
      throw new HindsightError('invalid-input', `unknown ${what} ${key}; expected one of ${[...allowed].join(', ')}`, { field: key });
    }
  }
}

function newMemory(item, index) {
  const fields = typeof item === 'string' ? { content: item } : { ...item };
  checkFields('memory field', fields, NEW_MEMORY_FIELDS);
  if (typeof fields.content !== 'string') {
    throw new HindsightError('invalid-input', `items[${index}].content: missing`, { item: index, field: 'content' });
  }
  if (fields.metadata && !Array.isArray(fields.metadata)) fields.metadata = Object.entries(fields.metadata);
  if (fields.vector) fields.vector = Float32Array.from(fields.vector);
  return { ...NEW_MEMORY_DEFAULTS, ...fields, occurredAt: ts(fields.occurredAt), validUntil: ts(fields.validUntil) };
}

export class Hindsight {
  /**
   * @param {object} options
   * @param {string} options.db SQLite file (created when missing; the Rust host's format)
   * @param {string} [options.models] directory with model.onnx and tokenizer.json
   * @param {object|null} [options.llm] `{url, model, apiKey, models, timeoutMs, retries, jsonMode}`;
   *   null: none; default: from HINDSIGHT_LLM_*
   * @param {object|string} [options.settings] engine settings (nested sections, as docs/settings.md lists them)
   */
  static async open({ db, models = modelsDir(), llm, settings = '' } = {}) {
    if (typeof db !== 'string' || !db) throw new HindsightError('invalid-input', 'db: the SQLite file to open', { field: 'db' });
    const read = (file) =>
      readFile(join(models, file)).catch(() => {
        throw new HindsightError('model', `no embedding model in ${models} (${file} is missing): run \`hindsight model fetch\`, or set HINDSIGHT_MODELS`);
      });
    const [model, tokenizer] = await Promise.all([read('model.onnx'), read('tokenizer.json')]);
    const llmClient = new OpenAiLlm(llm === undefined ? llmConfigFromEnv() : llm);
    const text = typeof settings === 'string' ? settings : JSON.stringify(settings);
    const hs = new Hindsight(new SqliteStore(db), llmClient, model, tokenizer, text);
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
    this.handles = new Map();
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
    this.handles.clear();
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

  /** The banks the database holds (the engine lists them). */
  banks() {
    return this.call((engine) => engine.banks());
  }

  /**
   * Recalls from several banks as one (`banks`: private first, then shared ones): ranked
   * together, on equal scores the bank listed first wins; each item names its `bank`.
   */
  recall({ banks, ...query }) {
    if (!Array.isArray(banks) || banks.length === 0 || !banks.every((b) => typeof b === 'string')) {
      throw new HindsightError('invalid-input', 'banks: must be a non-empty list of bank ids', { field: 'banks' });
    }
    if (new Set(banks).size !== banks.length) {
      throw new HindsightError('invalid-input', 'banks: a bank is listed twice', { field: 'banks' });
    }
    const q = recallQuery(query);
    const handles = banks.map((id) => this.bankHandle(id));
    return this.call(() => handles[0].recallWith(handles.slice(1), q));
  }

  bankHandle(id) {
    if (!this.handles.has(id)) this.handles.set(id, this.call((engine) => engine.openBank(id)));
    return this.handles.get(id);
  }

  modelId() {
    return this.call((engine) => engine.modelId());
  }

  embed(texts) {
    return this.call((engine) => engine.embed(texts));
  }

  /** Releases the LLM worker and checkpoints and closes the database. */
  async close() {
    this.llm.close();
    this.store.close();
  }
}

/** The WIT `recall-query` from `recall({query, k, …})` or `recall(query, {k, …})`. */
function recallQuery(query, options = {}) {
  const opts = typeof query === 'string' ? { ...options, query } : { ...query };
  checkFields('recall option', opts, RECALL_OPTIONS);
  if (typeof opts.query !== 'string') throw new HindsightError('invalid-input', 'query: missing', { field: 'query' });
  const q = {
    kinds: [], tags: [], includeSuperseded: false, trustedOnly: false, ...opts, now: ts(opts.now), asOf: ts(opts.asOf),
  };
  if (q.vector) q.vector = Float32Array.from(q.vector);
  return q;
}

/**
 * The WIT `list-query` from `list({kind, status, …})`: `status: 'any'` is every status (the WIT's
 * `any-status`), no status the active ones.
 */
function listQuery(options) {
  const opts = { ...options };
  checkFields('list option', opts, LIST_OPTIONS);
  const anyStatus = opts.status === 'any';
  return { ...opts, status: anyStatus ? undefined : opts.status, anyStatus, order: opts.order ?? 'newest' };
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

  /**
   * The memories that matter, best first, and a prompt block: `recall({query, k, …})`, or
   * `recall(query, {k, …})`. With `taskId`, the block's citation handles (`[m1]`) are the task's
   * and the memories its answer cites get its outcome when it ends; `agentId` names the caller
   * in the recall log.
   */
  recall(query, options = {}) {
    const q = recallQuery(query, options);
    return this.#call((b) => b.recall(q));
  }

  get(id) {
    return this.#call((b) => b.get(id));
  }

  /**
   * Archives a memory (restorable); with `hard`, erases it as `erase` does and returns the
   * receipt.
   */
  forget(id, { hard = false, now } = {}) {
    if (hard) return this.erase(id, { now });
    return this.#call((b) => b.forget(id, ts(now)));
  }

  /**
   * Erases a memory for good, with every copy of its text (merged records, the tasks holding it,
   * recall-log entries, shared copies); returns the receipt of what was erased and what remains.
   */
  erase(id, { now } = {}) {
    return this.#call((b) => b.erase(id, ts(now)));
  }

  /** Deletes the bank whole (memories, vectors, tasks, recall log) in one commit. */
  deleteBank() {
    return this.#call((b) => b.deleteBank());
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

  /** Decay, archive, expire, merge late duplicates, capacity; with `dryRun` the report only. */
  maintain({ now, dryRun = false } = {}) {
    return this.#call((b) => b.maintain(ts(now), dryRun));
  }

  /**
   * Starts a task: `beginTask({goal, taskType, agentId})` or `beginTask(goal)`; the memories
   * distilled from it carry `agentId`.
   */
  beginTask(goal, { taskType, agentId, now } = {}) {
    const o = typeof goal === 'string' ? { goal, taskType, agentId, now } : { ...goal };
    checkFields('task field', o, TASK_FIELDS);
    if (typeof o.goal !== 'string') throw new HindsightError('invalid-input', 'goal: missing', { field: 'goal' });
    const task = { goal: o.goal, taskType: o.taskType, agentId: o.agentId };
    const state = this.#call((b) => b.beginTask(task, ts(o.now)));
    return new Task(this, state.id);
  }

  /**
   * Distils a task told whole: `{goal, taskType, agentId, steps, facts, outcome, detail, force}`,
   * steps as `Task.step` takes them. Kept whole or not at all.
   */
  distillTrajectory(trajectory, { mayShare = true, now } = {}) {
    checkFields('trajectory field', trajectory, TRAJECTORY_FIELDS);
    const { goal, taskType, agentId, steps = [], facts = [], outcome, detail, force = false } = trajectory;
    if (typeof goal !== 'string') throw new HindsightError('invalid-input', 'goal: missing', { field: 'goal' });
    if (typeof outcome !== 'string') throw new HindsightError('invalid-input', 'outcome: missing (success, failure or interrupted)', { field: 'outcome' });
    const t = { goal, taskType, agentId, steps: steps.map(witStep), facts, outcome, detail, force: Boolean(force) };
    return this.#call((b) => b.distillTrajectory(t, Boolean(mayShare), ts(now)));
  }

  /** A task begun earlier (in this process or another), by id. */
  resumeTask(id) {
    this.#call((b) => b.task(id));
    return new Task(this, id);
  }

  /** Tasks, newest first; `all` includes ended ones. */
  tasks({ all = false } = {}) {
    return this.#call((b) => b.tasks(all));
  }

  /** Erases a task's record (steps, facts, notes) for good. */
  deleteTask(id) {
    return this.#call((b) => b.deleteTask(id));
  }

  /** Induces semantic memories from recent episodes (needs an LLM). */
  consolidate({ since, now } = {}) {
    return this.#call((b) => b.consolidate(ts(since), ts(now)));
  }

  /**
   * A page of memories, newest (or `order: 'most-recalled'`) first: filtered by kind, status
   * (default active; `'any'`), tag, taskType, source and text; pass `nextCursor` back as `cursor`.
   */
  list(options = {}) {
    const q = listQuery(options);
    return this.#call((b) => b.list(q));
  }

  /**
   * The user's correction of memory `id`: a new memory holding `text` (source user-feedback)
   * supersedes it, and active memories close to the old content lose confidence (`cascade`).
   */
  correct(id, text, { agentId, now } = {}) {
    return this.#call((b) => b.correct(id, text, agentId, ts(now)));
  }

  /** Reports that these memories were used (in task `taskId`, if given): each counts as cited. */
  used(ids, { taskId, now } = {}) {
    return this.#call((b) => b.used(ids, taskId, ts(now)));
  }

  /** Where a memory came from, what happened to it since, and every recall that returned it. */
  explain(id) {
    return this.#call((b) => b.explain(id));
  }

  /** Memories recalled often and never useful, never recalled, and the most useful. */
  audit() {
    return this.#call((b) => b.audit());
  }

  /**
   * What the bank's last retain, recall, task end, distillation, consolidation or maintenance
   * cost: `{llmCalls, promptTokens, completionTokens, embedTexts, elapsedMs, overBudget}`.
   */
  lastUsage() {
    return this.#call((b) => b.lastUsage());
  }

  /**
   * What the bank keeps that it should not: duplicates and contradictions left active, stale
   * memories, unused shares, untrusted and redacted counts, re-extractions caught, growth per
   * day; each finding with the ids and the command that fixes it. Changes nothing.
   */
  health({ now } = {}) {
    return this.#call((b) => b.health(ts(now)));
  }

  /** @internal */
  callBank(f) {
    return this.#call(f);
  }
}

/** A task's working memory while the agent works; `end` distils it. */
export class Task {
  constructor(bank, id) {
    this.bank = bank;
    this.id = id;
  }

  state() {
    return this.bank.callBank((b) => b.task(this.id));
  }

  /** Recalls for this task (`recall` with its `taskId`): what the answer cites gets the task's outcome. */
  recall(query, options = {}) {
    const q = recallQuery(query, options);
    return this.bank.callBank((b) => b.recall({ ...q, taskId: this.id }));
  }

  /** Any update: `{tag: 'step' | 'fact' | 'assumption' | 'question' | 'note' | 'current-step', val}`. */
  update(update, { expectedVersion, now } = {}) {
    return this.bank.callBank((b) => b.updateTask(this.id, update, expectedVersion, ts(now)));
  }

  /** Logs a step: `{type: 'thought' | 'tool-call' | 'tool-result' | 'user-message' | 'answer', text, tool, error, id}`. */
  step(step) {
    return this.update({ tag: 'step', val: witStep(step) }, { now: step.now });
  }

  fact(text, options) {
    return this.update({ tag: 'fact', val: text }, options);
  }

  assume(text, options) {
    return this.update({ tag: 'assumption', val: text }, options);
  }

  question(text, options) {
    return this.update({ tag: 'question', val: text }, options);
  }

  note(text, options) {
    return this.update({ tag: 'note', val: text }, options);
  }

  currentStep(text, options) {
    return this.update({ tag: 'current-step', val: text }, options);
  }

  /**
   * Ends the task and distils it when worth it (or `force`): `end({outcome, detail, force})` or
   * `end(outcome)`. The memories recalled for it that its answer or `detail` cites (`[m1]`) get
   * the outcome as feedback: `cited`; the rest are `unused`.
   */
  end(outcome, { detail, force = false, now } = {}) {
    const o = typeof outcome === 'string' ? { outcome, detail, force, now } : { force: false, ...outcome };
    return this.bank.callBank((b) => b.endTask(this.id, o.outcome, o.detail, Boolean(o.force), true, ts(o.now)));
  }

  /** Distils an ended task whose distillation was skipped or failed (`rulesOnly`: without the LLM). */
  distill({ rulesOnly = false, now } = {}) {
    return this.bank.callBank((b) => b.distillTask(this.id, rulesOnly, true, ts(now)));
  }
}
