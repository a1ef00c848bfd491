// The parity scenario (examples/parity) and what the Rust host recalled for it.
import { readFileSync } from 'node:fs';

const dir = new URL('../../../examples/parity/', import.meta.url);
export const scenario = JSON.parse(readFileSync(new URL('scenario.json', dir)));
export const expected = JSON.parse(readFileSync(new URL('expected.json', dir)));

export const memories = () =>
  scenario.memories.map((m) => ({ content: m.content, kind: m.kind, tags: m.tags, occurredAt: m.occurred_at }));

/** Each query's top items as `{content, total}`, recalled in the scenario's order. */
export function recallAll(bank) {
  return scenario.queries.map((q) => ({
    query: q.query,
    top: bank.recall(q.query, { k: q.k, now: scenario.now }).items.map((i) => ({
      content: i.memory.content,
      total: i.score.total,
    })),
  }));
}
