// The extras as a user gets them, run by test.sh from a fresh directory where the packed package
// and the pinned frameworks are installed: the README's "Vercel AI SDK" and "LangGraph.js"
// programs, verbatim, with the model calls going to the scripted server; then the store's round
// trip through the installed subpath.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { Hindsight } from 'hindsight-memory';
import { HindsightStore } from 'hindsight-memory/langgraph';
import { scriptedServer } from './scripted-llm.js';

const installed = dirname(createRequire(import.meta.url).resolve('hindsight-memory/package.json'));
const readme = readFileSync(join(installed, 'README.md'), 'utf8');
const program = (heading) => {
  const section = readme.slice(readme.indexOf(`\n## ${heading}\n`));
  return section.match(/```js\n([\s\S]*?)```/)[1];
};
const run = (heading, env = {}) => {
  const dir = mkdtempSync(join(process.cwd(), 'run-'));
  writeFileSync(join(dir, 'program.mjs'), program(heading));
  const out = execFileSync(process.execPath, ['program.mjs'], { cwd: dir, env: { ...process.env, ...env }, encoding: 'utf8' });
  return { dir, out };
};
const FACT = 'The team uses PostgreSQL 16 for every new service';

// Vercel AI SDK: the model calls `recall`, answers; then the wrapped model gets the memory as a
// system message and its exchange is retained.
const server = await scriptedServer();
await server.script([
  [200, { tool_calls: [{ id: 'c1', type: 'function', function: { name: 'recall', arguments: '{"query":"database for billing"}' } }] }],
  [200, 'Billing uses PostgreSQL 16.'],
  [200, 'The ledger service uses PostgreSQL 16 too.'],
]);
const ai = run('Vercel AI SDK', { OPENAI_BASE_URL: server.url, OPENAI_API_KEY: 'scripted' });
const requests = await server.received(3);
await server.close();
assert.equal(ai.out, 'Billing uses PostgreSQL 16.\nThe ledger service uses PostgreSQL 16 too.\n');
assert.ok(requests[1].messages.find((m) => m.role === 'tool').content.includes(FACT), 'recall returned the stored memory');
assert.ok(requests[2].messages.find((m) => m.role === 'system').content.includes(FACT), 'the middleware recalled into the prompt');
let hs = await Hindsight.open({ db: join(ai.dir, 'memory.db'), llm: null });
const exchange = hs.bank('agent').list({ tag: 'conversation' }).items.map((m) => m.content);
assert.deepEqual(exchange, ['User: Which database for the ledger service?\nAssistant: The ledger service uses PostgreSQL 16 too.']);
await hs.close();
console.log('ai-sdk: generateText recalled through memoryTools; withMemory recalled and retained the exchange');

// LangGraph.js: the README's graph, then the store's operations.
const lg = run('LangGraph.js');
assert.equal(lg.out.trim(), "[ 'Alice wants PostgreSQL for every new service' ]");
hs = await Hindsight.open({ db: join(lg.dir, 'memory.db'), llm: null });
const store = new HindsightStore(hs);
assert.deepEqual((await store.get(['users', 'alice'], 'db')).value, { text: 'Alice wants PostgreSQL for every new service' });
await store.put(['users', 'bob'], 'db', { text: 'Bob wants MySQL', n: 2 });
assert.deepEqual((await store.get(['users', 'bob'], 'db')).value, { text: 'Bob wants MySQL', n: 2 });
assert.equal((await store.search(['users'], { query: 'MySQL', limit: 1 }))[0].key, 'db');
assert.deepEqual((await store.search(['users'], { filter: { n: 2 } })).map((i) => i.namespace), [['users', 'bob']]);
assert.deepEqual(await store.listNamespaces({ prefix: ['users'] }), [['users', 'alice'], ['users', 'bob']]);
await store.delete(['users', 'bob'], 'db');
assert.equal(await store.get(['users', 'bob'], 'db'), null);
assert.deepEqual(await store.listNamespaces(), [['users', 'alice']]);
await assert.rejects(store.put(['not valid'], 'k', { v: 1 }), { name: 'InvalidNamespaceError' });
await assert.rejects(store.put(['users', 'alice'], 'db', { v: 1n }), { name: 'HindsightError' });
assert.ok(await store.get(['users', 'alice'], 'db'), 'a refused put loses nothing');
await hs.close();
console.log('langgraph: the graph found what it stored; put, get, search, delete and listNamespaces round-tripped');
for (const dir of [ai.dir, lg.dir]) rmSync(dir, { recursive: true, force: true });
