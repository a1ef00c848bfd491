// hindsight-memory/langgraph against the real @langchain/langgraph: a graph's nodes writing and
// searching through HindsightStore, the BaseStore operations, and bad input refused whole.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { Annotation, InMemoryStore, START, StateGraph } from '@langchain/langgraph';
import { InvalidNamespaceError } from '@langchain/langgraph-checkpoint';
import { Hindsight, HindsightError } from '../src/index.js';
import { HindsightStore } from '../src/langgraph.js';

const dir = mkdtempSync(join(tmpdir(), 'hindsight-langgraph-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const NOW = 1_767_225_600_000;

test('a graph writes through config.store and a later run finds it by meaning, after a reopen too', async () => {
  const db = join(dir, 'graph.db');
  const State = Annotation.Root({
    user: Annotation(),
    fact: Annotation(),
    question: Annotation(),
    found: Annotation(),
  });
  const build = (store) =>
    new StateGraph(State)
      .addNode('write', async (state, config) => {
        if (state.fact) await config.store.put(['users', state.user], `fact-${state.fact.length}`, { text: state.fact });
        return {};
      })
      .addNode('read', async (state, config) => {
        if (!state.question) return {};
        const hits = await config.store.search(['users', state.user], { query: state.question, limit: 2 });
        return { found: hits.map((h) => h.value.text) };
      })
      .addEdge(START, 'write')
      .addEdge('write', 'read')
      .compile({ store });

  let hs = await Hindsight.open({ db, llm: null });
  const graph = build(new HindsightStore(hs));
  await graph.invoke({ user: 'alice', fact: 'Alice wants PostgreSQL for every new service' });
  await graph.invoke({ user: 'alice', fact: 'Alice takes her coffee black' });
  await graph.invoke({ user: 'bob', fact: 'Bob wants MySQL' });
  const out = await graph.invoke({ user: 'alice', question: 'which database should the new service use?' });
  assert.equal(out.found[0], 'Alice wants PostgreSQL for every new service', JSON.stringify(out.found));
  assert.ok(!out.found.includes('Bob wants MySQL'), 'a namespace is searched alone');
  await hs.close();

  hs = await Hindsight.open({ db, llm: null });
  const again = await build(new HindsightStore(hs)).invoke({ user: 'alice', question: 'coffee' });
  assert.equal(again.found[0], 'Alice takes her coffee black');
  await hs.close();
});

test('put, get, replace, search, delete and listNamespaces keep the BaseStore contract', async () => {
  const hs = await Hindsight.open({ db: join(dir, 'store.db'), llm: null });
  let clock = NOW;
  const store = new HindsightStore(hs, { now: () => clock });
  const value = { text: 'Deploys go out on Tuesdays', team: 'infra', n: 3, nested: { list: [1, 'two', null], ok: true } };
  await store.put(['docs', 'infra'], 'deploys', value);
  await store.put(['docs', 'infra'], 'oncall', { text: 'The on-call rota changes every Monday', team: 'infra', n: 5 });
  await store.put(['docs', 'web'], 'css', { text: 'Use CSS modules, never global styles', team: 'web', n: 1 });
  await store.put(['docs', 'web'], 'similar', { text: 'Use CSS modules, never global styles', team: 'web', n: 2 });
  await store.put(['people'], 'ann', { name: 'Ann', bio: 'likes graphs' }, ['name']);

  const got = await store.get(['docs', 'infra'], 'deploys');
  assert.deepEqual(got.value, value);
  assert.deepEqual(got.namespace, ['docs', 'infra']);
  assert.equal(got.key, 'deploys');
  assert.equal(got.createdAt.getTime(), NOW);
  assert.equal(got.updatedAt.getTime(), NOW);
  assert.equal(await store.get(['docs', 'infra'], 'missing'), null);
  assert.equal((await store.get(['docs', 'web'], 'similar')).value.n, 2, 'two keys with the same text stay two');

  clock = NOW + 60_000;
  await store.put(['docs', 'infra'], 'deploys', { ...value, text: 'Deploys go out on Wednesdays' });
  const replaced = await store.get(['docs', 'infra'], 'deploys');
  assert.equal(replaced.value.text, 'Deploys go out on Wednesdays');
  assert.equal(replaced.createdAt.getTime(), NOW, 'a replacement keeps the item created-at');
  assert.equal(replaced.updatedAt.getTime(), NOW + 60_000);
  assert.equal(hs.bank('docs:infra').list({ status: 'any' }).total, 2, 'the old version is erased, not archived');

  const byMeaning = await store.search(['docs'], { query: 'when do deploys happen', limit: 1 });
  assert.equal(byMeaning.length, 1);
  assert.equal(byMeaning[0].key, 'deploys');
  assert.equal(typeof byMeaning[0].score, 'number');
  const all = await store.search(['docs']);
  assert.deepEqual(all.map((i) => i.key).sort(), ['css', 'deploys', 'oncall', 'similar']);
  assert.ok(all.every((i) => i.score === undefined), 'no query, no score');
  assert.deepEqual(all.map((i) => i.key)[0], 'deploys', 'newest update first');
  const filtered = await store.search(['docs'], { filter: { team: 'infra', n: { $gte: 4 } } });
  assert.deepEqual(filtered.map((i) => i.key), ['oncall']);
  const page = await store.search(['docs'], { filter: { team: { $in: ['web', 'infra'] } }, limit: 2, offset: 1 });
  assert.equal(page.length, 2);
  assert.deepEqual((await store.search(['docs', 'web'], { query: 'styling', filter: { n: 2 } })).map((i) => i.key), ['similar']);
  assert.deepEqual((await store.search(['people'], { query: 'Ann' })).map((i) => i.key), ['ann'], 'indexed by name');
  assert.deepEqual(await store.search(['nobody']), []);

  assert.deepEqual(await store.listNamespaces(), [['docs', 'infra'], ['docs', 'web'], ['people']]);
  assert.deepEqual(await store.listNamespaces({ prefix: ['docs'] }), [['docs', 'infra'], ['docs', 'web']]);
  assert.deepEqual(await store.listNamespaces({ suffix: ['web'] }), [['docs', 'web']]);
  assert.deepEqual(await store.listNamespaces({ prefix: ['*', 'infra'] }), [['docs', 'infra']]);
  assert.deepEqual(await store.listNamespaces({ maxDepth: 1 }), [['docs'], ['people']]);
  assert.deepEqual(await store.listNamespaces({ limit: 1, offset: 1 }), [['docs', 'web']]);

  await store.delete(['docs', 'infra'], 'deploys');
  assert.equal(await store.get(['docs', 'infra'], 'deploys'), null);
  await store.delete(['docs', 'infra'], 'deploys'); // deleting again is a no-op
  await store.put(['people'], 'ann', null); // a null value deletes
  assert.deepEqual(await store.listNamespaces(), [['docs', 'infra'], ['docs', 'web']], 'an emptied namespace is not listed');

  const [one, none, listed] = await store.batch([
    { namespace: ['docs', 'web'], key: 'css' },
    { namespace: ['docs', 'web'], key: 'nope' },
    { matchConditions: [{ matchType: 'prefix', path: ['docs'] }], limit: 10, offset: 0 },
  ]);
  assert.equal(one.key, 'css');
  assert.equal(none, null);
  assert.equal(listed.length, 2);
  await hs.close();
});

test('bad input is refused before anything is written; what was stored stays', async () => {
  const hs = await Hindsight.open({ db: join(dir, 'bad.db'), llm: null });
  const store = new HindsightStore(hs, { now: () => NOW });
  await store.put(['users', 'alice'], 'prefs', { db: 'PostgreSQL' });
  const kept = async () => assert.deepEqual((await store.get(['users', 'alice'], 'prefs')).value, { db: 'PostgreSQL' });

  for (const namespace of [['a b'], ['users', 'al/ice'], ['x'.repeat(129)], ['ünï']]) {
    await assert.rejects(store.put(namespace, 'k', { v: 1 }), (e) => e instanceof InvalidNamespaceError && /^namespace: /.test(e.message));
  }
  await assert.rejects(store.put(['users', 'a.b'], 'k', { v: 1 }), InvalidNamespaceError, "LangGraph's own label rules");
  await assert.rejects(store.put([], 'k', { v: 1 }), InvalidNamespaceError);
  await assert.rejects(store.search(['a b'], { query: 'x' }), InvalidNamespaceError);
  await assert.rejects(store.get(['a b'], 'k'), InvalidNamespaceError);

  const cycle = { name: 'loop' };
  cycle.self = cycle;
  for (const value of [{ big: 10n }, cycle, 'text', [1, 2]]) {
    await assert.rejects(
      store.batch([
        { namespace: ['users', 'alice'], key: 'prefs', value: { db: 'overwritten' } },
        { namespace: ['users', 'alice'], key: 'bad', value },
      ]),
      (e) => e instanceof HindsightError && e.kind === 'invalid-input' && e.field === 'value' && /value: /.test(e.message),
    );
  }
  await assert.rejects(store.put(['users', 'alice'], 'prefs', { db: 'x'.repeat(40_000) }), (e) => e.field === 'value');
  await assert.rejects(store.put(['users', 'alice'], 'k'.repeat(1001), { v: 1 }), (e) => e.field === 'key');
  assert.throws(() => new HindsightStore(undefined), (e) => e instanceof HindsightError && e.field === 'hs');
  await kept();
  assert.equal(await store.get(['users', 'alice'], 'bad'), null);
  assert.equal(hs.bank('users:alice').list({ status: 'any' }).total, 1, 'nothing else was written');
  await hs.close();
});

test('the store answers like the InMemoryStore for the same operations (no query)', async () => {
  const hs = await Hindsight.open({ db: join(dir, 'parity.db'), llm: null });
  const ours = new HindsightStore(hs);
  const theirs = new InMemoryStore();
  for (const store of [ours, theirs]) {
    await store.put(['a'], 'k1', { n: 1, tag: 'x' });
    await store.put(['a', 'b'], 'k2', { n: 2, tag: 'y' });
    await store.put(['c'], 'k3', { n: 3, tag: 'x' });
    await store.delete(['c'], 'k3');
  }
  const strip = (items) => items.map(({ namespace, key, value }) => ({ namespace, key, value })).sort((x, y) => x.key.localeCompare(y.key));
  assert.deepEqual(strip(await ours.search(['a'])), strip(await theirs.search(['a'])));
  assert.deepEqual(strip(await ours.search([], { filter: { tag: 'x' } })), strip(await theirs.search([], { filter: { tag: 'x' } })));
  assert.deepEqual(await ours.listNamespaces({ prefix: ['a'] }), await theirs.listNamespaces({ prefix: ['a'] }));
  await hs.close();
});
