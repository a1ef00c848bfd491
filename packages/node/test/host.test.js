import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { Worker } from 'node:worker_threads';
import { Hindsight, HindsightError } from '../src/index.js';
import { Conflict, SqliteStore } from '../src/store.js';
import { expected, memories, recallAll, scenario } from './scenario.js';

const dir = mkdtempSync(join(tmpdir(), 'hindsight-node-'));
after(() => rmSync(dir, { recursive: true, force: true }));

function assertSameAsRust(actual) {
  assert.equal(actual.length, expected.queries.length);
  actual.forEach((got, i) => {
    const want = expected.queries[i];
    assert.deepEqual(got.top.map((t) => t.content), want.top.map((t) => t.content), `top items for ${want.query}`);
    got.top.forEach((t, j) => {
      const diff = Math.abs(t.total - want.top[j].total);
      assert.ok(diff <= 1e-4, `score of ${t.content}: ${t.total} vs the Rust host's ${want.top[j].total}`);
    });
  });
}

test('recalls what the Rust host recalls, and a second process recalls it from the file', async () => {
  const db = join(dir, 'parity.db');
  const hs = await Hindsight.open({ db, llm: null });
  const outcomes = hs.bank(scenario.bank).retain(memories(), { now: scenario.now });
  assert.equal(outcomes.filter((o) => o.id).length, scenario.memories.length, JSON.stringify(outcomes));
  assertSameAsRust(recallAll(hs.bank(scenario.bank)));
  hs.close();

  const out = JSON.parse(execFileSync(process.execPath, [new URL('recall-child.mjs', import.meta.url).pathname, db]));
  assert.equal(out.stats.active, scenario.memories.length);
  // Recalls count as accesses, so scores move; the items and their order must not.
  assert.deepEqual(
    out.queries.map((q) => q.top.map((t) => t.content)),
    expected.queries.map((q) => q.top.map((t) => t.content)),
  );
});

test('engine errors are HindsightErrors with the WIT variant; nothing stored is lost', async () => {
  const hs = await Hindsight.open({ db: join(dir, 'errors.db'), llm: null });
  const bank = hs.bank('errors');
  const [kept] = bank.retain(['Run the integration tests with TZ=UTC'], { now: scenario.now });
  assert.throws(
    () => bank.get('no-such-id'),
    (e) => e instanceof HindsightError && e.kind === 'not-found' && e.what === 'memory' && e.id === 'no-such-id',
  );
  assert.throws(
    () => bank.retain([{ content: '   ' }], { now: scenario.now }),
    (e) => e instanceof HindsightError && e.kind === 'invalid-input' && /content/.test(e.message),
  );
  assert.throws(() => bank.recall('x', { k: 3, colour: 'red' }), /unknown recall option colour/);
  assert.equal(bank.get(kept.id).content, 'Run the integration tests with TZ=UTC');
  hs.close();
});

let server;
let serverPort;
const requests = [];
const message = (pred) =>
  new Promise((ok) => {
    const on = (m) => {
      if (pred(m)) {
        server.off('message', on);
        ok(m);
      }
    };
    server.on('message', on);
  });
const script = async (answers) => {
  const done = message((m) => m.scripted);
  server.postMessage({ answers });
  await done;
};
before(async () => {
  server = new Worker(new URL('./scripted-llm.js', import.meta.url));
  server.on('message', (m) => m.request && requests.push(m.request));
  serverPort = (await message((m) => m.port)).port;
});
after(() => server.postMessage({ close: true }));

test('the LLM import reaches an OpenAI-compatible server through fetch', async () => {
  const url = `http://127.0.0.1:${serverPort}/v1`;
  const hs = await Hindsight.open({ db: join(dir, 'llm.db'), llm: { url, model: 'scripted', timeoutMs: 5000, retries: 0 } });
  const bank = hs.bank('llm');
  const plain = 'The office plant on the third floor was watered today';

  await script([[200, JSON.stringify({ scores: [{ item: 0, importance: 2 }] })]]);
  const [dropped] = bank.retain([plain], { now: scenario.now });
  assert.equal(dropped.action, 'filtered', JSON.stringify(dropped));
  assert.match(dropped.reason, /importance 2\/10/);
  while (requests.length === 0) await new Promise((ok) => setTimeout(ok, 10));
  const asked = requests.at(-1);
  assert.equal(asked.model, 'scripted');
  assert.equal(asked.response_format.type, 'json_schema');
  assert.ok(asked.messages.some((m) => m.content.includes('office plant')));

  await script([[503, 'overloaded']]);
  const [kept] = bank.retain([plain], { now: scenario.now });
  assert.equal(kept.action, 'created', JSON.stringify(kept));
  assert.match(kept.reason, /HTTP 503/);
  hs.close();
});

test('the store applies a commit only while its expectations hold', () => {
  const store = new SqliteStore(join(dir, 'expect.db'));
  const bytes = (s) => new TextEncoder().encode(s);
  store.commit([{ tag: 'expect', val: ['b/x/seq', undefined] }, { tag: 'put', val: ['b/x/seq', bytes('1')] }]);
  assert.throws(
    () => store.commit([{ tag: 'expect', val: ['b/x/seq', undefined] }, { tag: 'put', val: ['b/x/m/a', bytes('lost')] }]),
    Conflict,
  );
  assert.equal(store.get('b/x/m/a'), undefined, 'a refused commit applies nothing');
  store.commit([{ tag: 'expect', val: ['b/x/seq', bytes('1')] }, { tag: 'delete', val: 'b/x/seq' }]);
  assert.equal(store.get('b/x/seq'), undefined);
  store.close();
});
