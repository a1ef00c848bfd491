// hindsight-memory/langgraph: a LangGraph.js store (BaseStore) over hindsight.
import { BaseStore, type Operation, type OperationResults } from '@langchain/langgraph-checkpoint';
import type { Hindsight } from './index.js';

export interface HindsightStoreOptions {
  /** The value's fields embedded for search (paths: `a.b`, `a[0]`, `a[*].b`); default `['$']`, the whole value. */
  index?: { fields?: string[] };
  /** The clock (milliseconds or a Date); default the wall clock. */
  now?: () => number | Date;
}

/**
 * A namespace is the bank its labels name joined with ':' (labels of A-Z a-z 0-9 - _; an invalid
 * one throws InvalidNamespaceError); an item is one memory, its value kept as JSON. `search` with
 * a query is hindsight's recall over the namespaces under the prefix; `filter` applies after.
 */
export class HindsightStore extends BaseStore {
  constructor(hs: Hindsight, options?: HindsightStoreOptions);
  batch<Op extends Operation[]>(operations: Op): Promise<OperationResults<Op>>;
}
