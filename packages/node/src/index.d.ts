// The package's types, over the records jco generates from the WIT (generated/, shipped with it).
import type * as wit from '../generated/interfaces/hindsight-memory-types.js';

/** Timestamps are milliseconds since the Unix epoch, as numbers (the WIT's s64 is a BigInt in raw jco). */
type Millis = number;
type WithMillis<T> = T extends bigint
  ? number
  : T extends Float32Array | Uint8Array
    ? T
    : T extends Array<infer E>
      ? Array<WithMillis<E>>
      : T extends object
        ? { [K in keyof T]: WithMillis<T[K]> }
        : T;
type When = Millis | Date;

export type Memory = WithMillis<wit.Memory>;
export type Score = wit.Score;
export type Recalled = WithMillis<wit.Recalled>;
export type RecallResult = WithMillis<wit.RecallResult>;
export type RetainOutcome = wit.RetainOutcome;
export type Stats = WithMillis<wit.Stats>;
export type HistoryEntry = WithMillis<wit.HistoryEntry>;
export type MaintainReport = wit.MaintainReport;
export type FeedbackOutcome = wit.FeedbackOutcome;
export type TaskState = WithMillis<wit.TaskState>;
export type TaskEnd = WithMillis<wit.TaskEnd>;
export type Distilled = wit.Distilled;
export type TaskUpdate = WithMillis<wit.TaskUpdate>;
export type TaskOutcome = wit.TaskOutcome;
export type StepKind = wit.StepKind;
export type ListPage = WithMillis<wit.ListPage>;
export type Cascaded = wit.Cascaded;
export type Correction = WithMillis<wit.Correction>;
export type UseRecord = WithMillis<wit.UseRecord>;
export type RecallHit = wit.RecallHit;
export type RecallLogEntry = WithMillis<wit.RecallLogEntry>;
export type Explanation = WithMillis<wit.Explanation>;
export type AuditItem = wit.AuditItem;
export type Audit = wit.Audit;
export type HealthKind = wit.HealthKind;
export type HealthFinding = wit.HealthFinding;
export type HealthReport = wit.HealthReport;
export type Usage = WithMillis<wit.Usage>;
export type OperationUsage = WithMillis<wit.OperationUsage>;

/** What to retain: text, or the WIT `new-memory` fields (camelCase); unset fields take the engine's defaults. */
export type NewMemory =
  | string
  | (Partial<Omit<WithMillis<wit.NewMemory>, 'content' | 'metadata' | 'vector' | 'occurredAt' | 'validUntil'>> & {
      content: string;
      metadata?: Array<[string, string]> | Record<string, string>;
      vector?: ArrayLike<number>;
      occurredAt?: When;
      validUntil?: When;
    });

export type RecallOptions = Partial<Omit<WithMillis<wit.RecallQuery>, 'query' | 'vector' | 'now' | 'asOf'>> & {
  vector?: ArrayLike<number>;
  now?: When;
  asOf?: When;
};

/** Which memories `list` returns: the WIT `list-query`, with `status: 'any'` for every status. */
export type ListOptions = Partial<Omit<wit.ListQuery, 'status' | 'anyStatus'>> & {
  /** Default: active ones. */
  status?: wit.Status | 'any';
};

export interface LlmConfig {
  /** API base (http://127.0.0.1:8080/v1) or the full …/chat/completions URL. */
  url: string;
  model?: string;
  apiKey?: string;
  /** A different model per operation. */
  models?: Partial<Record<'extract' | 'importance' | 'consolidate' | 'judge', string>>;
  /** Per request; default 30000. */
  timeoutMs?: number;
  /** On 429, 5xx and network errors; default 2 (the importance question is never retried). */
  retries?: number;
  /** The first retry's wait, doubling (or what Retry-After says), at most 8 s; default 500. */
  backoffMs?: number;
  jsonMode?: 'json_schema' | 'json_object' | 'none';
}

export interface OpenOptions {
  /** SQLite file, created when missing (the Rust host's format: one file opens in every host). */
  db: string;
  /** Directory with model.onnx and tokenizer.json (default: $HINDSIGHT_MODELS, else ~/.cache/hindsight/models). */
  models?: string;
  /** null: no LLM. Default: from the HINDSIGHT_LLM_* variables. */
  llm?: LlmConfig | null;
  /** Engine settings: nested sections, e.g. `{ recall: { default_k: 3 } }` (or their JSON). */
  settings?: object | string;
}

/**
 * A WIT error (`kind`: invalid-input, not-found, store, model, limit, corrupt, llm, conflict, unsupported)
 * or a trap (`kind: 'trap'`). For invalid-input: the `field`, and the `item` of a batch; for
 * not-found: `what` was missing (`memory`, `task`, `bank`) and its `id`.
 */
export class HindsightError extends Error {
  readonly kind: wit.Error['tag'] | 'trap';
  readonly detail: string;
  readonly item?: number;
  readonly field?: string;
  readonly what?: string;
  readonly id?: string;
}

/** A malformed LLM setting; `field` names the option or environment variable. */
export class LlmConfigError extends Error {
  readonly field: string;
}

export function llmConfigFromEnv(env?: Record<string, string | undefined>): LlmConfig | null;
export function modelsDir(env?: Record<string, string | undefined>): string;

export class Hindsight {
  static open(options: OpenOptions): Promise<Hindsight>;
  bank(id: string): Bank;
  /** The banks the database holds. */
  banks(): string[];
  /**
   * Recalls from several banks as one (private first, then shared): ranked together; on equal
   * scores the bank listed first wins; each item names its `bank`.
   */
  recall(options: RecallOptions & { banks: string[]; query: string; k?: number }): RecallResult;
  modelId(): string;
  embed(texts: string[]): Float32Array[];
  /** A fresh instance after a trap; everything acknowledged is in the store. */
  reset(): Promise<void>;
  /** Checkpoints and closes the database. */
  close(): Promise<void>;
}

export interface StepInput {
  type: StepKind;
  text: string;
  tool?: string;
  error?: boolean;
  /** The caller's id: sent again (a retry), it is recorded once. */
  id?: string;
  now?: When;
}

export interface UpdateOptions {
  expectedVersion?: number;
  now?: When;
}

export class Task {
  readonly id: string;
  state(): TaskState;
  /** Recalls for this task: what its answer cites (`[m1]`) gets the task's outcome when it ends. */
  recall(query: string, options?: Omit<RecallOptions, 'taskId'> & { k?: number }): RecallResult;
  recall(options: Omit<RecallOptions, 'taskId'> & { query: string; k?: number }): RecallResult;
  update(update: TaskUpdate, options?: UpdateOptions): TaskState;
  step(step: StepInput): TaskState;
  fact(text: string, options?: UpdateOptions): TaskState;
  assume(text: string, options?: UpdateOptions): TaskState;
  question(text: string, options?: UpdateOptions): TaskState;
  note(text: string, options?: UpdateOptions): TaskState;
  currentStep(text: string, options?: UpdateOptions): TaskState;
  end(outcome: TaskOutcome, options?: { detail?: string; force?: boolean; now?: When }): TaskEnd;
  end(options: { outcome: TaskOutcome; detail?: string; force?: boolean; now?: When }): TaskEnd;
  distill(options?: { rulesOnly?: boolean; now?: When }): TaskEnd;
}

export interface Erasure {
  /** Every record erased, as `bank/id`: the one asked for, those merged into it, shared copies. */
  memories: string[];
  vectors: number;
  recallLogEntries: number;
  /** Tasks (`bank/task`) whose texts held the memory's text or whose citations named it. */
  tasks: string[];
  /** Where a trace remains that the engine cannot remove. */
  remaining: string[];
}

export interface Trajectory {
  goal: string;
  taskType?: string;
  agentId?: string;
  steps?: StepInput[];
  facts?: string[];
  outcome: TaskOutcome;
  detail?: string;
  force?: boolean;
}

export class Bank {
  readonly id: string;
  retain(items: NewMemory[], options?: { now?: When }): RetainOutcome[];
  recall(query: string, options?: RecallOptions & { k?: number }): RecallResult;
  recall(options: RecallOptions & { query: string; k?: number }): RecallResult;
  get(id: string): Memory;
  /** Archives (restorable); with `hard`, erases as `erase` does and returns the receipt. */
  forget(id: string, options?: { hard?: false; now?: When }): void;
  forget(id: string, options: { hard: true; now?: When }): Erasure;
  /** Erases a memory and every copy of its text; the receipt says what was erased and what remains. */
  erase(id: string, options?: { now?: When }): Erasure;
  /** Deletes the bank whole in one commit; returns the number of stored keys removed. */
  deleteBank(): number;
  restore(id: string, options?: { now?: When }): Memory;
  unsupersede(id: string, options?: { now?: When }): Memory;
  stats(): Stats;
  feedback(ids: string[], outcome: FeedbackOutcome, options?: { now?: When }): Memory[];
  history(id: string): HistoryEntry[];
  maintain(options?: { now?: When; dryRun?: boolean }): MaintainReport;
  beginTask(goal: string, options?: { taskType?: string; agentId?: string; now?: When }): Task;
  beginTask(options: { goal: string; taskType?: string; agentId?: string; now?: When }): Task;
  /** Distils a task told whole (kept whole or not at all). */
  distillTrajectory(trajectory: Trajectory, options?: { mayShare?: boolean; now?: When }): TaskEnd;
  resumeTask(id: string): Task;
  tasks(options?: { all?: boolean }): TaskState[];
  deleteTask(id: string): void;
  consolidate(options?: { since?: When; now?: When }): Distilled[];
  /** A page of memories, newest or most recalled first; pass `nextCursor` back as `cursor`. */
  list(options?: ListOptions): ListPage;
  /** A new memory holding `text` (source user-feedback) supersedes `id`; similar ones lose confidence. */
  correct(id: string, text: string, options?: { agentId?: string; now?: When }): Correction;
  /** These memories were used (in task `taskId`): each counts as cited. */
  used(ids: string[], options?: { taskId?: string; now?: When }): Memory[];
  explain(id: string): Explanation;
  audit(): Audit;
  /** What the last retain, recall, task end, distillation, consolidation or maintenance cost. */
  lastUsage(): Usage;
  /** Duplicates, contradictions and stale memories (each with its fix), unused shares, defence counts, growth. */
  health(options?: { now?: When }): HealthReport;
}
