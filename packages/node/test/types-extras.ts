// Compiled by `npm test` (tsc --noEmit): the subpaths' types against the installed frameworks.
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { generateText, stepCountIs } from 'ai';
import { StateGraph, Annotation, START } from '@langchain/langgraph';
import { Hindsight } from '../src/index.js';
import { memoryMiddleware, memoryTools, withMemory } from '../src/ai-sdk.js';
import { HindsightStore } from '../src/langgraph.js';

export async function typedExtras(): Promise<void> {
  const hs = await Hindsight.open({ db: 'memory.db', llm: null });
  const model = createOpenAICompatible({ name: 'local', baseURL: 'http://127.0.0.1:8080/v1' })('m');
  const tools = memoryTools(hs, { bank: 'agent', k: 3 });
  const { text, steps } = await generateText({ model: withMemory(model, hs, { bank: 'agent' }), tools, stopWhen: stepCountIs(3), prompt: 'q' });
  const mw = memoryMiddleware(hs, { bank: 'agent', retain: false });
  const store = new HindsightStore(hs, { now: () => Date.now(), index: { fields: ['text'] } });
  await store.put(['users', 'alice'], 'k', { text: 'v' });
  const item = await store.get(['users', 'alice'], 'k');
  const hits = await store.search(['users'], { query: 'v', filter: { text: 'v' }, limit: 3 });
  const score: number | undefined = hits[0]?.score;
  const State = Annotation.Root({ x: Annotation<string>() });
  const graph = new StateGraph(State).addNode('n', async () => ({})).addEdge(START, 'n').compile({ store });
  console.log(text, steps.length, mw, item?.value, score, graph, await store.listNamespaces({ maxDepth: 1 }));
  await hs.close();
}
