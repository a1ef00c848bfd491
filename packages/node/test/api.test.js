// The whole API through the component: tasks, consolidation, corrections and erasure.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { Hindsight, HindsightError } from '../src/index.js';

const dir = mkdtempSync(join(tmpdir(), 'hindsight-api-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const NOW = 1_767_225_600_000;

test('a task from begin to a rule-based distillation, resumed from a second handle', async () => {
  const hs = await Hindsight.open({ db: join(dir, 'tasks.db'), llm: null });
  const bank = hs.bank('agent');
  const task = bank.beginTask({ goal: 'clean the vendor CSV', taskType: 'data-cleaning' });
  task.step({ type: 'tool-call', tool: 'python', text: "pd.read_csv('v.csv')", id: 's1' });
  task.step({ type: 'tool-call', tool: 'python', text: "pd.read_csv('v.csv')", id: 's1' }); // a retry
  task.step({ type: 'tool-result', tool: 'python', error: true, text: 'UnicodeDecodeError: byte 0xff' });
  task.fact('the vendor CSV starts with a BOM');
  task.assume('every vendor file is UTF-16');
  task.question('does the vendor send Excel files too?');
  task.note('ask the vendor for a schema');
  const state = task.currentStep('re-read with utf-8-sig');
  assert.equal(state.steps.length, 2, 'the same step id twice is one step');
  assert.deepEqual(state.confirmedFacts, ['the vendor CSV starts with a BOM']);
  assert.throws(
    () => task.fact('x y z', { expectedVersion: 1 }),
    (e) => e instanceof HindsightError && e.kind === 'conflict',
  );

  const again = bank.resumeTask(task.id);
  assert.equal(again.state().goal, 'clean the vendor CSV');
  assert.equal(bank.tasks().length, 1);
  const end = again.end({ outcome: 'success', force: true });
  assert.equal(end.method, 'rules');
  assert.ok(end.items.some((i) => i.content.includes('BOM')), JSON.stringify(end.items));
  assert.equal(bank.tasks().length, 0, 'ended tasks are listed only with all');
  assert.equal(bank.tasks({ all: true }).length, 1);
  assert.throws(() => again.distill(), /already/);
  bank.deleteTask(task.id);
  assert.throws(() => bank.resumeTask(task.id), (e) => e.kind === 'not-found');
  assert.deepEqual(hs.banks(), ['agent']);
  await hs.close();
});

test('a wrong supersede is undone; a hard forget leaves no byte of the text', async () => {
  const db = join(dir, 'undo.db');
  const hs = await Hindsight.open({ db, llm: null });
  const bank = hs.bank('agent');
  const [images] = bank.retain([{ content: 'The CDN cache TTL for images is 1 day', kind: 'semantic' }], { now: NOW });
  const [wrong] = bank.retain([{ content: 'The CDN cache TTL for images now is 7 days', kind: 'semantic' }], { now: NOW + 1 });
  assert.equal(wrong.action, 'superseded');
  const back = bank.unsupersede(images.id);
  assert.equal(back.status, 'active');
  assert.deepEqual(back.conflictsWith, [wrong.id]);

  const [secret] = bank.retain([{ content: 'The staging codename is PLATYPUS-9981', force: true }], { now: NOW });
  const receipt = bank.forget(secret.id, { hard: true });
  assert.deepEqual(receipt.memories, [`agent/${secret.id}`]);
  assert.throws(() => bank.get(secret.id), (e) => e.kind === 'not-found');
  await hs.close();
  for (const file of [db, `${db}-wal`]) {
    let bytes;
    try {
      bytes = readFileSync(file);
    } catch {
      continue;
    }
    assert.ok(!bytes.includes('PLATYPUS-9981'), `${file} still holds the erased text`);
  }
});

test('a trajectory told whole is distilled; a bad step leaves no task; a deleted bank is gone', async () => {
  const hs = await Hindsight.open({ db: join(dir, 'trajectory.db'), llm: null });
  const bank = hs.bank('agent');
  const steps = [
    { type: 'tool-call', text: 'pip install pandas==1.5', tool: 'shell', now: NOW },
    { type: 'tool-result', text: 'ERROR: no matching distribution for python 3.13', tool: 'shell', error: true, now: NOW + 1 },
    { type: 'answer', text: 'Installed pandas 2.2 instead, which supports python 3.13', now: NOW + 2 },
  ];
  const end = bank.distillTrajectory(
    { goal: 'install pandas on python 3.13', agentId: 'coder', steps, facts: ['python is 3.13'], outcome: 'success', force: true },
    { now: NOW + 3 },
  );
  assert.equal(end.method, 'rules');
  const stored = end.items.map((d) => d.outcome.id).filter(Boolean);
  assert.ok(stored.length >= 1, `the trajectory was distilled: ${end.reason}`);
  for (const id of stored) assert.equal(bank.get(id).agentId, 'coder');
  assert.throws(
    () => bank.distillTrajectory({ goal: 'x', steps: [{ type: 'dance', text: 'y' }], outcome: 'success' }),
    (e) => e instanceof HindsightError && e.kind === 'invalid-input' && e.field === 'type',
  );
  assert.throws(() => bank.distillTrajectory({ goal: 'x', outcome: 'success', colour: 'red' }), (e) => e.field === 'colour');
  assert.equal(bank.tasks({ all: true }).length, 1, 'the refused trajectory left no task');
  assert.ok(bank.deleteBank() > 0);
  assert.deepEqual(hs.banks(), []);
  await hs.close();
});

test('consolidation without an LLM says it needs one; maintain has a dry run', async () => {
  const hs = await Hindsight.open({ db: join(dir, 'consolidate.db'), llm: null });
  const bank = hs.bank('agent');
  bank.retain(['The nightly export failed twice this week with a timeout'], { now: NOW });
  assert.throws(() => bank.consolidate(), (e) => e instanceof HindsightError && e.kind === 'llm');
  const report = bank.maintain({ now: NOW + 400 * 86_400_000, dryRun: true });
  assert.ok(report.steps.length >= 1);
  assert.equal(bank.stats().active, 1, 'a dry run changes nothing');
  assert.throws(() => bank.recall({ query: 'x', colour: 'red' }), (e) => e.kind === 'invalid-input' && e.field === 'colour');
  await hs.close();
});

test('recall across banks ranks them together and names each item\'s bank', async () => {
  const hs = await Hindsight.open({ db: join(dir, 'spaces.db'), llm: null });
  hs.bank('agent:coder').retain(['Lunch orders go through the office chat']);
  hs.bank('shared').retain(['Vendor model X-200 fails its firmware update over Wi-Fi; use the USB cable']);
  const hits = hs.recall({ banks: ['agent:coder', 'shared'], query: 'firmware update fails', k: 2 });
  assert.equal(hits.items[0].bank, 'shared');
  assert.match(hits.items[0].memory.content, /X-200/);
  assert.equal(hits.items[1].bank, 'agent:coder');
  assert.match(hits.prompt, /shared, from shared\]/);
  assert.throws(() => hs.recall({ banks: ['shared', 'shared'], query: 'x' }), (e) => e.kind === 'invalid-input' && e.field === 'banks');
  await hs.close();
});

test('a correction supersedes the memory and lowers a near-duplicate\'s confidence', async () => {
  const hs = await Hindsight.open({ db: join(dir, 'correct.db'), llm: null });
  const bank = hs.bank('agent');
  const [wrong, similar, other] = bank.retain(
    [
      { content: 'The staging database port is 5433', force: true },
      { content: 'The staging database port is 5433 today', force: true },
      { content: 'Lunch is served at noon in the cafeteria', force: true },
    ],
    { now: NOW },
  );
  const [before, otherBefore] = [bank.get(similar.id).confidence, bank.get(other.id).confidence];
  const fix = bank.correct(wrong.id, 'The staging database port is 6543', { now: NOW + 1 });
  assert.equal(fix.superseded, wrong.id);
  assert.equal(fix.memory.source, 'user-feedback');
  assert.deepEqual(fix.memory.supersedes, [wrong.id]);
  assert.equal(bank.get(wrong.id).status, 'superseded');
  assert.deepEqual(fix.cascade.map((c) => c.id), [similar.id], 'only the near-duplicate loses confidence');
  assert.ok(fix.cascade[0].after < fix.cascade[0].before);
  assert.ok(Math.abs(fix.cascade[0].before - before) < 1e-6);
  assert.ok(Math.abs(bank.get(similar.id).confidence - fix.cascade[0].after) < 1e-6);
  assert.equal(bank.get(other.id).confidence, otherBefore, 'an unrelated memory keeps its confidence');
  const hits = bank.recall('staging database port', { now: NOW + 2 }).items.map((i) => i.memory.id);
  assert.ok(!hits.includes(wrong.id), 'the corrected memory is gone from recall');
  assert.equal(hits[0], fix.memory.id);
  assert.throws(() => bank.correct(wrong.id, 'port 7000'), (e) => e instanceof HindsightError);
  await hs.close();
});

test('list filters and pages with a cursor, every memory once', async () => {
  const hs = await Hindsight.open({ db: join(dir, 'list.db'), llm: null });
  const bank = hs.bank('agent');
  const facts = Array.from({ length: 7 }, (_, i) => ({
    content: `Fact number ${i} about the vendor CSV files`,
    tags: [i % 2 === 0 ? 'even' : 'odd'],
    occurredAt: NOW + i,
    force: true,
  }));
  const ids = bank.retain([...facts, { content: 'Restart the worker with systemctl', kind: 'procedural', force: true }], {
    now: NOW,
  }).map((o) => o.id);
  const all = bank.list();
  assert.equal(all.total, 8);
  assert.equal(all.nextCursor, undefined, 'one page holds them all');
  assert.equal(bank.list({ kind: 'procedural' }).items[0].id, ids[7]);
  assert.equal(bank.list({ tag: 'even' }).total, 4);
  assert.equal(bank.list({ text: 'NUMBER 3' }).items[0].id, ids[3]);

  const seen = [];
  let cursor;
  do {
    const page = bank.list({ limit: 3, cursor });
    assert.ok(page.items.length <= 3);
    assert.equal(page.total, 8, 'every page counts every match');
    seen.push(...page.items.map((m) => m.id));
    cursor = page.nextCursor;
  } while (cursor);
  assert.deepEqual([...seen].sort(), [...ids].sort());

  bank.forget(ids[0], { now: NOW + 10 });
  assert.equal(bank.list().total, 7, 'active ones by default');
  assert.deepEqual(bank.list({ status: 'archived' }).items.map((m) => m.id), [ids[0]]);
  assert.equal(bank.list({ status: 'any' }).total, 8);
  assert.throws(() => bank.list({ colour: 'red' }), (e) => e.kind === 'invalid-input' && e.field === 'colour');
  assert.throws(() => bank.list({ cursor: 'bogus' }), (e) => e instanceof HindsightError && e.kind !== 'trap');
  await hs.close();
});

test('a task\'s answer cites what it recalled; explain and the audit tell what was useful', async () => {
  const hs = await Hindsight.open({ db: join(dir, 'audit.db'), llm: null });
  const bank = hs.bank('agent');
  const [encoding, columns] = bank.retain(
    [
      { content: 'Read the vendor CSV with encoding utf-8-sig', force: true },
      { content: 'The vendor CSV has twelve columns', force: true },
    ],
    { now: NOW },
  ).map((o) => o.id);
  const task = bank.beginTask({ goal: 'clean the vendor CSV', now: NOW });
  const recalled = task.recall('vendor CSV', { agentId: 'coder', now: NOW });
  const handle = recalled.items.find((i) => i.memory.id === encoding).handle;
  assert.match(handle, /^m\d+$/);
  assert.ok(recalled.prompt.includes(`[${handle}]`), recalled.prompt);
  task.step({ type: 'answer', text: `Read it with utf-8-sig, as [${handle}] says.`, now: NOW });
  const end = task.end({ outcome: 'success', now: NOW + 1 });
  assert.deepEqual(end.cited, [encoding]);
  assert.deepEqual(end.unused, [columns]);

  const why = bank.explain(encoding);
  assert.equal(why.memory.id, encoding);
  assert.equal(why.recalls.length, 1);
  assert.equal(why.cited, 1);
  assert.equal(why.helpful, 1);
  assert.equal(why.recalls[0].agentId, 'coder');
  assert.equal(why.recalls[0].taskId, task.id);
  assert.ok(why.events.some((e) => e.event === 'cited' && e.taskId === task.id), JSON.stringify(why.events));

  // The office plant memories are recalled five times (audit.unused_after); one is reported used.
  const [noisy, useful, quiet] = bank.retain(
    [
      { content: 'The office plant needs water on Mondays', force: true },
      { content: 'The plant food is in the left drawer of the office', force: true },
      { content: 'Quarterly taxes are due in April', force: true },
    ],
    { now: NOW },
  ).map((o) => o.id);
  for (let i = 0; i < 5; i++) bank.recall('office plant', { k: 2, now: NOW + 2 + i });
  const [reported] = bank.used([useful], { now: NOW + 10 });
  assert.equal(reported.id, useful);
  const audit = bank.audit();
  assert.equal(audit.bank, 'agent');
  assert.equal(audit.logEntries, 6);
  assert.deepEqual(audit.neverUseful.map((i) => i.id), [noisy]);
  assert.deepEqual(audit.neverRecalled.map((i) => i.id), [quiet]);
  assert.ok(audit.mostUseful.some((i) => i.id === useful && i.cited === 1), JSON.stringify(audit.mostUseful));
  assert.throws(() => bank.explain('no-such-id'), (e) => e.kind === 'not-found');
  await hs.close();
});

test('health finds a forced duplicate with its fix, and every call reports its usage', async () => {
  const hs = await Hindsight.open({ db: join(dir, 'health.db'), llm: null });
  const bank = hs.bank('agent');
  const [first, copy] = bank.retain(
    [
      { content: 'The staging cluster runs Kubernetes 1.29', force: true },
      { content: 'The staging cluster runs Kubernetes 1.29', force: true },
    ],
    { now: NOW },
  ).map((o) => o.id);
  assert.equal(bank.lastUsage().embedTexts, 2);
  assert.equal(bank.lastUsage().llmCalls, 0);
  const report = bank.health({ now: NOW + 1 });
  assert.equal(report.active, 2);
  const duplicates = report.findings.filter((f) => f.kind === 'duplicate');
  assert.equal(duplicates.length, 1, JSON.stringify(report.findings));
  assert.deepEqual([...duplicates[0].ids].sort(), [first, copy].sort());
  assert.equal(duplicates[0].fix, 'hindsight maintain --bank agent');
  bank.maintain({ now: NOW + 1 });
  assert.deepEqual(bank.health({ now: NOW + 1 }).findings, []);
  bank.recall('staging cluster', { now: NOW + 2 });
  assert.equal(bank.lastUsage().embedTexts, 1);
  const totals = bank.stats().usage;
  assert.ok(totals.some((u) => u.operation === 'retain' && Number(u.calls) === 1), JSON.stringify(totals, (_, v) => (typeof v === 'bigint' ? Number(v) : v)));
  await hs.close();
});
