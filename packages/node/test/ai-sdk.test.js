// hindsight-memory/ai-sdk against the real `ai` package: the model (the scripted
// OpenAI-compatible server, through @ai-sdk/openai-compatible) calls the memory tools, and the
// middleware recalls into the prompt and retains the exchange.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { InvalidToolInputError, generateText, stepCountIs, streamText } from 'ai';
import { Hindsight, HindsightError } from '../src/index.js';
import { memoryTools, withMemory } from '../src/ai-sdk.js';
import { scriptedServer } from './scripted-llm.js';

const dir = mkdtempSync(join(tmpdir(), 'hindsight-ai-sdk-'));
const NOW = 1_767_225_600_000;
const FACT = 'The team uses PostgreSQL 16 for every new service';
let server;
let model;
before(async () => {
  server = await scriptedServer();
  model = createOpenAICompatible({ name: 'scripted', baseURL: server.url })('scripted');
});
after(async () => {
  await server.close();
  rmSync(dir, { recursive: true, force: true });
});
const call = (name, args, id = `call-${name}`) => ({ id, type: 'function', function: { name, arguments: JSON.stringify(args) } });

test('generateText: the model recalls through memoryTools, then remembers and forgets', async () => {
  const hs = await Hindsight.open({ db: join(dir, 'tools.db'), llm: null });
  const bank = hs.bank('agent');
  const [stored] = bank.retain([{ content: FACT, kind: 'semantic' }], { now: NOW });
  const tools = memoryTools(hs, { bank: 'agent', k: 3 });
  assert.deepEqual(Object.keys(tools), ['remember', 'recall', 'forget']);

  await server.script([
    [200, { tool_calls: [call('recall', { query: 'which database for the new service' })] }],
    [200, 'Use PostgreSQL 16.'],
  ]);
  const asked = server.requests.length;
  const result = await generateText({ model, tools, stopWhen: stepCountIs(3), prompt: 'Which database should the billing service use?' });
  assert.equal(result.text, 'Use PostgreSQL 16.');
  const recalled = result.steps[0].toolResults[0];
  assert.equal(recalled.toolName, 'recall');
  assert.equal(recalled.output.memories[0].id, stored.id);
  assert.equal(recalled.output.memories[0].content, FACT);
  assert.equal(typeof recalled.output.memories[0].score, 'number');
  await server.received(asked + 2);
  const sent = server.requests[asked];
  assert.deepEqual(sent.tools.map((t) => t.function.name), ['remember', 'recall', 'forget']);
  const toolMessage = server.requests[asked + 1].messages.find((m) => m.role === 'tool');
  assert.ok(toolMessage.content.includes(FACT), 'the memory went back to the model');

  await server.script([
    [200, { tool_calls: [call('remember', { content: 'The billing service is written in Go', tags: ['billing'] })] }],
    [200, { tool_calls: [call('forget', { id: 'm-no-such-memory' }), call('remember', { content: '   ' }, 'call-empty')] }],
    [200, 'Noted.'],
  ]);
  const second = await generateText({ model, tools, stopWhen: stepCountIs(4), prompt: 'Remember where billing runs.' });
  assert.equal(second.text, 'Noted.');
  const remembered = second.steps[0].toolResults[0].output;
  assert.equal(remembered.action, 'created');
  assert.equal(bank.get(remembered.id).content, 'The billing service is written in Go');
  assert.deepEqual(bank.get(remembered.id).tags, ['billing']);
  const errors = second.steps[1].content.filter((c) => c.type === 'tool-error');
  const byName = Object.fromEntries(errors.map((e) => [e.toolName, e.error]));
  assert.ok(byName.forget instanceof HindsightError && byName.forget.kind === 'not-found', String(byName.forget));
  // Input the schema refuses never reaches hindsight: the SDK marks the call invalid and tells the model.
  const invalid = second.steps[1].content.find((c) => c.type === 'tool-call' && c.toolName === 'remember');
  assert.ok(invalid.invalid && InvalidToolInputError.isInstance(invalid.error), String(invalid.error));
  assert.match(byName.remember, /content/);

  await server.script([[200, { tool_calls: [call('forget', { id: remembered.id })] }], [200, 'Forgotten.']]);
  await generateText({ model, tools, stopWhen: stepCountIs(2), prompt: 'Forget where billing runs.' });
  assert.equal(bank.get(remembered.id).status, 'archived');
  assert.equal(bank.get(stored.id).status, 'active', 'the other memory is untouched');
  await hs.close();
});

test('withMemory: the recalled memory reaches the model as a system message; the exchange is retained', async () => {
  const hs = await Hindsight.open({ db: join(dir, 'middleware.db'), llm: null });
  const bank = hs.bank('agent');
  bank.retain([{ content: FACT, kind: 'semantic' }], { now: NOW });
  const remembering = withMemory(model, hs, { bank: 'agent', k: 2 });

  await server.script([[200, 'PostgreSQL 16, as for every new service.']]);
  const asked = server.requests.length;
  const { text } = await generateText({
    model: remembering,
    system: 'You are terse.',
    prompt: 'Which database should the billing service use?',
  });
  assert.equal(text, 'PostgreSQL 16, as for every new service.');
  const messages = (await server.received(asked + 1))[asked].messages;
  assert.deepEqual(messages.map((m) => m.role), ['system', 'system', 'user']);
  assert.equal(messages[0].content, 'You are terse.');
  assert.ok(messages[1].content.includes(FACT), messages[1].content);
  const [exchange] = bank.list({ tag: 'conversation' }).items;
  assert.equal(exchange.content, 'User: Which database should the billing service use?\nAssistant: PostgreSQL 16, as for every new service.');
  assert.equal(exchange.kind, 'episodic');

  await server.script([[200, 'Streamed: the payments team owns it.']]);
  const streamed = streamText({ model: remembering, prompt: 'Who owns the database of the ledger service?' });
  let seen = '';
  for await (const delta of streamed.textStream) seen += delta;
  await server.received(asked + 2);
  assert.equal(seen, 'Streamed: the payments team owns it.');
  assert.ok(server.requests.at(-1).stream);
  assert.ok(server.requests.at(-1).messages[0].content.includes('PostgreSQL 16'), 'recalled for the stream too');
  const texts = bank.list({ tag: 'conversation' }).items.map((m) => m.content);
  assert.ok(texts.includes('User: Who owns the database of the ledger service?\nAssistant: Streamed: the payments team owns it.'), JSON.stringify(texts));

  const quiet = withMemory(model, hs, { bank: 'agent', retain: false });
  await server.script([[200, 'Nothing kept.']]);
  await generateText({ model: quiet, prompt: 'Say something' });
  assert.equal(bank.list({ tag: 'conversation' }).total, 2, 'retain: false keeps nothing');
  await hs.close();
});

test('a missing or malformed bank is refused when the adapter is made; stored memories stay', async () => {
  const hs = await Hindsight.open({ db: join(dir, 'bad.db'), llm: null });
  const [kept] = hs.bank('agent').retain([FACT], { now: NOW });
  const bad = (field) => (e) => e instanceof HindsightError && e.kind === 'invalid-input' && e.field === field && e.message.includes(`${field}:`);
  assert.throws(() => memoryTools(hs, {}), bad('bank'));
  assert.throws(() => memoryTools(hs), bad('bank'));
  assert.throws(() => memoryTools(hs, { bank: 'not a bank id!' }), bad('bank'));
  assert.throws(() => memoryTools(undefined, { bank: 'agent' }), bad('hs'));
  assert.throws(() => memoryTools(hs, { bank: 'agent', k: 0 }), bad('k'));
  assert.throws(() => withMemory(model, hs, { k: 3 }), bad('bank'));
  assert.throws(() => withMemory(model, hs, { bank: 'a/b' }), bad('bank'));
  assert.equal(hs.bank('agent').get(kept.id).content, FACT);
  assert.deepEqual(hs.banks(), ['agent']);
  await hs.close();
});
