// hindsight-memory/ai-sdk: memory tools and a memory middleware for the Vercel AI SDK (`ai`).
import type { LanguageModelMiddleware, Tool, wrapLanguageModel } from 'ai';
import type { Hindsight, RetainOutcome } from './index.js';

type WrappableModel = Parameters<typeof wrapLanguageModel>[0]['model'];
type WrappedModel = ReturnType<typeof wrapLanguageModel>;

export interface MemoryToolsOptions {
  /** The bank the tools read and write (checked now: a missing or malformed id throws HindsightError). */
  bank: string;
  /** Memories `recall` returns when the model names no `k`; default 5. */
  k?: number;
}

export interface RecalledMemory {
  id: string;
  content: string;
  /** The fused recall score. */
  score: number;
}

export type MemoryTools = {
  /** Retains `content` (with `tags`); the engine may reinforce or merge it into a memory it has. */
  remember: Tool<{ content: string; tags?: string[] }, { id: string | null; action: RetainOutcome['action'] }>;
  /** The memories that match `query`, best first. */
  recall: Tool<{ query: string; k?: number }, { memories: RecalledMemory[] }>;
  /** Archives a memory (restorable with `bank.restore`). */
  forget: Tool<{ id: string }, { id: string; forgotten: true }>;
};

export function memoryTools(hs: Hindsight, options: MemoryToolsOptions): MemoryTools;

export interface WithMemoryOptions {
  bank: string;
  /** Memories recalled into each call; default 5. */
  k?: number;
  /** false: recall only, retain nothing; default true. */
  retain?: boolean;
}

/**
 * Before each call: the memories recalled for the last user message as a system message (after
 * the prompt's own). After it (a stream: when it ends): the exchange retained as an episodic
 * memory tagged `conversation`.
 */
export function memoryMiddleware(hs: Hindsight, options: WithMemoryOptions): LanguageModelMiddleware;

/** `wrapLanguageModel({ model, middleware: memoryMiddleware(hs, options) })`. */
export function withMemory(model: WrappableModel, hs: Hindsight, options: WithMemoryOptions): WrappedModel;
