// Compiled by `npm test` (tsc --noEmit): the package's types over jco's generated records.
import { Hindsight, HindsightError, type RecallResult, type RetainOutcome, type TaskEnd } from '../src/index.js';

export async function typed(): Promise<void> {
  const hs = await Hindsight.open({ db: 'memory.db', llm: null, settings: { recall: { default_k: 3 } } });
  const bank = hs.bank('agent');
  const outcomes: RetainOutcome[] = bank.retain(
    ['plain text', { content: 'structured', kind: 'procedural', tags: ['csv'], occurredAt: 1_767_225_600_000 }],
    { now: 1_767_225_600_000 },
  );
  const id: string | undefined = outcomes[0].id;
  const result: RecallResult = bank.recall({ query: 'query', k: 3, kinds: ['procedural'] });
  const again: RecallResult = bank.recall('query', { k: 3 });
  const when: number = result.items[0].memory.occurredAt;
  const total: number = again.items[0].score.total;
  const task = bank.beginTask({ goal: 'clean the vendor CSV' });
  task.step({ type: 'tool-call', tool: 'python', text: "pd.read_csv('v.csv')" });
  task.fact('the vendor CSV starts with a BOM');
  const end: TaskEnd = task.end({ outcome: 'success', force: true });
  const method: 'llm' | 'rules' | 'skipped' = end.method;
  try {
    bank.get(id ?? 'none');
  } catch (e) {
    if (e instanceof HindsightError) console.log(e.kind, e.detail, e.field, when, total, method);
  }
  await hs.close();
}
