// Compiled by `npm test` (tsc --noEmit): the package's types over jco's generated records.
import {
  Hindsight,
  HindsightError,
  type Audit,
  type Correction,
  type Explanation,
  type ListPage,
  type RecallResult,
  type RetainOutcome,
  type TaskEnd,
} from '../src/index.js';

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

export async function browsed(): Promise<void> {
  const hs = await Hindsight.open({ db: 'memory.db', llm: null });
  const bank = hs.bank('agent');
  const page: ListPage = bank.list({ kind: 'semantic', status: 'any', order: 'most-recalled', limit: 10 });
  const next: string | undefined = page.nextCursor;
  const fix: Correction = bank.correct(page.items[0].id, 'the right text', { now: new Date() });
  const lowered: number[] = fix.cascade.map((c) => c.after);
  bank.used([fix.memory.id], { taskId: 't1' });
  const why: Explanation = bank.explain(fix.memory.id);
  const when: number = why.recalls[0].at;
  const audit: Audit = bank.audit();
  const task = bank.beginTask('clean the vendor CSV');
  const handle: string | undefined = task.recall('vendor CSV', { agentId: 'coder' }).items[0].handle;
  const end: TaskEnd = task.end('success');
  console.log(next, lowered, when, audit.neverUseful.length, handle, end.cited, end.unused);
  await hs.close();
}
