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

  const [secret] = bank.retain([{ content: 'The staging password is PLATYPUS-9981', force: true }], { now: NOW });
  bank.forget(secret.id, { hard: true });
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
