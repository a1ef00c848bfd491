// Compiled by `npm test` (tsc --noEmit): the wrapper's types over jco's generated records.
import { Hindsight, HindsightError, type RecallResult, type RetainOutcome } from '../src/index.js';

export async function typed(): Promise<void> {
  const hs = await Hindsight.open({ db: 'memory.db', llm: null });
  const bank = hs.bank('agent');
  const outcomes: RetainOutcome[] = bank.retain(
    ['plain text', { content: 'structured', kind: 'procedural', tags: ['csv'], occurredAt: 1_767_225_600_000 }],
    { now: 1_767_225_600_000 },
  );
  const id: string | undefined = outcomes[0].id;
  const result: RecallResult = bank.recall('query', { k: 3, kinds: ['procedural'] });
  const when: number = result.items[0].memory.occurredAt;
  const total: number = result.items[0].score.total;
  try {
    bank.get(id ?? 'none');
  } catch (e) {
    if (e instanceof HindsightError) console.log(e.kind, e.detail, when, total);
  }
  hs.close();
}
