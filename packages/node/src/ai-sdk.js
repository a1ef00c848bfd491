// hindsight for the Vercel AI SDK (`ai`): memory tools for the model, and a middleware that
// recalls before each call and retains the exchange after it.
//
//   const tools = memoryTools(hs, { bank: 'agent' });
//   await generateText({ model, tools, stopWhen: stepCountIs(3), prompt: 'Which database do we use?' });
//   const model = withMemory(openai('gpt-4o-mini'), hs, { bank: 'agent' });
import { tool, wrapLanguageModel } from 'ai';
import { z } from 'zod';
import { HindsightError } from './index.js';

/** The bank the adapter works on, checked now (a missing or malformed id fails here, not at the first call). */
function openBank(hs, options, what) {
  if (!hs || typeof hs.bank !== 'function') {
    throw new HindsightError('invalid-input', `hs: ${what} needs a Hindsight instance (await Hindsight.open(...))`, { field: 'hs' });
  }
  const { bank } = options ?? {};
  if (typeof bank !== 'string' || bank === '') {
    throw new HindsightError('invalid-input', `bank: ${what} needs { bank: '<bank id>' }`, { field: 'bank' });
  }
  const b = hs.bank(bank);
  b.stats(); // the engine's bank-id rules
  return b;
}

const kOption = (k, fallback) => {
  if (k === undefined) return fallback;
  if (!Number.isInteger(k) || k < 1) throw new HindsightError('invalid-input', `k: must be a positive integer, got ${k}`, { field: 'k' });
  return k;
};

/**
 * Tools for `generateText` / `streamText`: `remember` ({content, tags}) retains a memory,
 * `recall` ({query, k}) returns the memories that match, best first, `forget` ({id}) archives
 * one (restorable with `bank.restore`).
 */
export function memoryTools(hs, options) {
  const bank = openBank(hs, options, 'memoryTools');
  const k = kOption(options.k, 5);
  return {
    remember: tool({
      description: 'Save something worth remembering for later tasks: a fact, a preference, a fix that worked.',
      inputSchema: z.object({
        content: z.string().trim().min(1).describe('The memory, as one self-contained sentence.'),
        tags: z.array(z.string().trim().min(1)).optional().describe('Short labels, e.g. "preference".'),
      }),
      execute: async ({ content, tags = [] }) => {
        const [outcome] = bank.retain([{ content, tags }]);
        return { id: outcome.id ?? null, action: outcome.action };
      },
    }),
    recall: tool({
      description: 'Search the memory for what is known about something, before answering or acting.',
      inputSchema: z.object({
        query: z.string().trim().min(1).describe('What to look for, in plain words.'),
        k: z.number().int().min(1).max(50).optional().describe(`How many memories (default ${k}).`),
      }),
      execute: async ({ query, k: n = k }) => ({
        memories: bank.recall({ query, k: n }).items.map(({ memory, score }) => ({
          id: memory.id,
          content: memory.content,
          score: score.total,
        })),
      }),
    }),
    forget: tool({
      description: 'Forget a memory that is wrong or outdated, by the id recall returned.',
      inputSchema: z.object({ id: z.string().min(1).describe('The memory id.') }),
      execute: async ({ id }) => {
        bank.forget(id);
        return { id, forgotten: true };
      },
    }),
  };
}

/** The text of the prompt's last user message (its text parts). */
function lastUserText(prompt) {
  const user = [...prompt].reverse().find((m) => m.role === 'user');
  if (!user) return '';
  const parts = typeof user.content === 'string' ? [{ type: 'text', text: user.content }] : user.content;
  return parts
    .filter((p) => p.type === 'text')
    .map((p) => p.text)
    .join('\n')
    .trim();
}

const MAX_SIDE = 4000;
const clip = (text) => (text.length > MAX_SIDE ? `${text.slice(0, MAX_SIDE)}…` : text);

/**
 * The middleware `withMemory` applies: before each call, the memories recalled for the last user
 * message go in as a system message (after the prompt's own system messages); after the call, the
 * exchange (the user's text and the answer's text) is retained as an episodic memory tagged
 * `conversation`. For streams, it is retained when the stream ends.
 */
export function memoryMiddleware(hs, options) {
  const bank = openBank(hs, options, 'withMemory');
  const k = kOption(options.k, 5);
  const retainExchange = options.retain !== false;
  const keep = (params, answer) => {
    const user = lastUserText(params.prompt);
    if (!retainExchange || !user || !answer.trim()) return;
    bank.retain([{ content: `User: ${clip(user)}\nAssistant: ${clip(answer.trim())}`, kind: 'episodic', tags: ['conversation'] }]);
  };
  return {
    specificationVersion: 'v4',
    transformParams: async ({ params }) => {
      const query = lastUserText(params.prompt);
      if (!query) return params;
      const { prompt: block } = bank.recall({ query, k });
      if (!block.trim()) return params;
      const at = params.prompt.findIndex((m) => m.role !== 'system');
      const prompt = [...params.prompt];
      prompt.splice(at === -1 ? prompt.length : at, 0, { role: 'system', content: block });
      return { ...params, prompt };
    },
    wrapGenerate: async ({ doGenerate, params }) => {
      const result = await doGenerate();
      keep(params, result.content.filter((c) => c.type === 'text').map((c) => c.text).join(''));
      return result;
    },
    wrapStream: async ({ doStream, params }) => {
      const { stream, ...rest } = await doStream();
      let answer = '';
      const tap = new TransformStream({
        transform(part, controller) {
          if (part.type === 'text-delta') answer += part.delta;
          controller.enqueue(part);
        },
        flush() {
          keep(params, answer);
        },
      });
      return { stream: stream.pipeThrough(tap), ...rest };
    },
  };
}

/** `model` with hindsight's memory: `wrapLanguageModel` with `memoryMiddleware(hs, options)`. */
export function withMemory(model, hs, options) {
  return wrapLanguageModel({ model, middleware: memoryMiddleware(hs, options) });
}
