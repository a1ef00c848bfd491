// The wrapper's types, over the records jco generates from the WIT (run `npm run build` first).
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

export type Memory = WithMillis<wit.Memory>;
export type Recalled = WithMillis<wit.Recalled>;
export type RecallResult = WithMillis<wit.RecallResult>;
export type RetainOutcome = wit.RetainOutcome;
export type Stats = WithMillis<wit.Stats>;
export type HistoryEntry = WithMillis<wit.HistoryEntry>;
export type MaintainReport = wit.MaintainReport;
export type FeedbackOutcome = wit.FeedbackOutcome;

/** What to retain: text, or the WIT `new-memory` fields (camelCase); unset fields take the engine's defaults. */
export type NewMemory =
  | string
  | (Partial<Omit<WithMillis<wit.NewMemory>, 'content' | 'metadata' | 'vector'>> & {
      content: string;
      metadata?: Array<[string, string]> | Record<string, string>;
      vector?: ArrayLike<number>;
    });

export type RecallOptions = Partial<Omit<WithMillis<wit.RecallQuery>, 'query' | 'vector'>> & {
  vector?: ArrayLike<number>;
};

export interface LlmConfig {
  url: string;
  model?: string;
  apiKey?: string;
  timeoutMs?: number;
  retries?: number;
}

export interface OpenOptions {
  /** SQLite file, created when missing (the Rust host's schema). */
  db: string;
  /** Directory with model.onnx and tokenizer.json (default: $HINDSIGHT_MODELS or ~/.cache/hindsight/models). */
  models?: string;
  /** The component (default: $HINDSIGHT_WASM or the repository's build). */
  wasm?: string;
  /** null: no LLM. Default: from HINDSIGHT_LLM_* variables. */
  llm?: LlmConfig | null;
  /** Engine settings, JSON text. */
  settings?: string;
}

/**
 * A WIT error (`kind`: invalid-input, not-found, store, model, limit, corrupt, llm, conflict, unsupported)
 * or a trap (`kind: 'trap'`). For invalid-input: the `field`, and the `item` of a batch.
 */
export class HindsightError extends Error {
  readonly kind: wit.Error['tag'] | 'trap';
  readonly detail: string;
  readonly item?: number;
  readonly field?: string;
}

export class Hindsight {
  static open(options: OpenOptions): Promise<Hindsight>;
  bank(id: string): Bank;
  modelId(): string;
  embed(texts: string[]): Float32Array[];
  /** A fresh instance after a trap; everything acknowledged is in the store. */
  reset(): Promise<void>;
  close(): void;
}

export class Bank {
  readonly id: string;
  retain(items: NewMemory[], options?: { now?: Millis }): RetainOutcome[];
  recall(query: string, options?: RecallOptions): RecallResult;
  get(id: string): Memory;
  forget(id: string, options?: { hard?: boolean; now?: Millis }): void;
  restore(id: string, options?: { now?: Millis }): Memory;
  stats(): Stats;
  feedback(ids: string[], outcome: FeedbackOutcome, options?: { now?: Millis }): Memory[];
  history(id: string): HistoryEntry[];
  maintain(options?: { now?: Millis }): MaintainReport;
}
