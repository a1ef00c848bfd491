// hindsight as a LangGraph.js store (`BaseStore`): each namespace is a bank, each item a memory.
//
//   const store = new HindsightStore(hs);
//   const graph = builder.compile({ store });   // nodes use config.store.put / search / get
import { BaseStore, InvalidNamespaceError, validateNamespace } from '@langchain/langgraph-checkpoint';
import { HindsightError } from './index.js';

/** Every item carries ITEM; those searchable by a query also INDEXED; KEY_TAG narrows a lookup. */
const ITEM = 'langgraph:item';
const INDEXED = 'langgraph:indexed';
const keyTag = (key) => `langgraph:key:${key}`.trim(); // the engine trims tags
const KEY = 'langgraph_key';
const CREATED = 'langgraph_created_at';
const MAX_KEY_BYTES = 1000; // the tag above stays within the engine's 1024-byte field limit
const MAX_K = 1000; // the engine's recall limit (limits.max_k) and list page size
const MAX_TEXT = 8000; // characters of the text to embed (the value itself is kept whole)
const LABEL = /^[A-Za-z0-9_-]+$/;

/** The bank for a namespace: its labels joined with ':', within the bank-id rules. */
function bankId(namespace, { allowEmpty = false, put = false } = {}) {
  if (!Array.isArray(namespace)) throw new InvalidNamespaceError(`namespace: must be an array of labels, got ${typeof namespace}`);
  validateNamespace(namespace, { allowEmpty, allowReservedRoot: !put });
  const id = namespace.join(':');
  if (namespace.some((label) => !LABEL.test(label)) || id.length > 128) {
    throw new InvalidNamespaceError(
      `namespace: ${JSON.stringify(namespace)} is not a hindsight bank id: labels must be A-Z a-z 0-9 - _, and the labels joined with ':' at most 128 characters`,
    );
  }
  return id;
}

function checkKey(key) {
  if (typeof key !== 'string') throw new HindsightError('invalid-input', `key: must be a string, got ${typeof key}`, { field: 'key' });
  if (Buffer.byteLength(key) > MAX_KEY_BYTES) {
    throw new HindsightError('invalid-input', `key: is longer than ${MAX_KEY_BYTES} bytes`, { field: 'key' });
  }
}

/** The value's JSON text; a value JSON cannot hold (a BigInt, a cycle) throws before anything is stored. */
function jsonText(value) {
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw new HindsightError('invalid-input', `value: must be an object (or null to delete), got ${Array.isArray(value) ? 'an array' : typeof value}`, { field: 'value' });
  }
  try {
    return JSON.stringify(value);
  } catch (e) {
    throw new HindsightError('invalid-input', `value: is not JSON-serialisable: ${e.message}`, { field: 'value' });
  }
}

/** The texts at a path of a value: `$` (all of it), `a.b`, `a[0]`, `a[-1]`, `a[*].b`. */
function textsAt(value, path) {
  if (path === '$') return [JSON.stringify(value)];
  let nodes = [value];
  for (const token of path.match(/[^.[\]]+|\[[^\]]*\]/g) ?? []) {
    const next = [];
    for (const node of nodes) {
      if (node === null || typeof node !== 'object') continue;
      if (token.startsWith('[')) {
        if (!Array.isArray(node)) continue;
        const index = token.slice(1, -1);
        if (index === '*') next.push(...node);
        else {
          const i = Number(index);
          if (Number.isInteger(i)) next.push(node[i < 0 ? node.length + i : i]);
        }
      } else if (token === '*') next.push(...Object.values(node));
      else if (token in node) next.push(node[token]);
    }
    nodes = next;
  }
  return nodes
    .filter((n) => n !== undefined && n !== null)
    .map((n) => (typeof n === 'object' ? JSON.stringify(n) : String(n)));
}

/** LangGraph's filter: exact values, or operators ($eq $ne $gt $gte $lt $lte $in $nin), on top-level fields. */
const OPERATORS = new Set(['$eq', '$ne', '$gt', '$gte', '$lt', '$lte', '$in', '$nin']);
const same = (a, b) => a === b || (typeof a === 'object' && a !== null && JSON.stringify(a) === JSON.stringify(b));
function matches(value, filter) {
  return Object.entries(filter ?? {}).every(([field, want]) => {
    const have = value[field];
    const ops = want !== null && typeof want === 'object' && !Array.isArray(want) && Object.keys(want);
    if (!ops || ops.length === 0 || !ops.every((op) => OPERATORS.has(op))) return same(have, want);
    return ops.every((op) => {
      const v = want[op];
      switch (op) {
        case '$eq': return same(have, v);
        case '$ne': return !same(have, v);
        case '$gt': return Number(have) > Number(v);
        case '$gte': return Number(have) >= Number(v);
        case '$lt': return Number(have) < Number(v);
        case '$lte': return Number(have) <= Number(v);
        case '$in': return Array.isArray(v) && v.some((x) => same(have, x));
        case '$nin': return !Array.isArray(v) || !v.some((x) => same(have, x));
        default: return false;
      }
    });
  });
}

const keyOf = (memory) => memory.metadata.find(([k]) => k === KEY)?.[1];

function toItem(memory, bank, score) {
  const created = Number(memory.metadata.find(([k]) => k === CREATED)?.[1] ?? memory.createdAt);
  const item = {
    namespace: bank.split(':'),
    key: keyOf(memory),
    value: JSON.parse(memory.context),
    createdAt: new Date(created),
    updatedAt: new Date(memory.createdAt),
  };
  return score === undefined ? item : { ...item, score };
}

/**
 * A LangGraph.js store over hindsight: a namespace is the bank named by its labels joined with
 * ':', an item one memory (its value as JSON in the memory's `context`, the text to embed as its
 * content). `search` with a query is hindsight's recall over the namespaces under the prefix.
 */
export class HindsightStore extends BaseStore {
  /**
   * @param {import('./index.js').Hindsight} hs
   * @param {{ index?: { fields?: string[] }, now?: () => number | Date }} [options]
   *   `index.fields`: the value's fields to embed (default `['$']`, the whole value);
   *   `now`: the clock (default the wall clock).
   */
  constructor(hs, { index, now } = {}) {
    super();
    if (!hs || typeof hs.bank !== 'function') {
      throw new HindsightError('invalid-input', 'hs: HindsightStore needs a Hindsight instance (await Hindsight.open(...))', { field: 'hs' });
    }
    this.hs = hs;
    this.fields = index?.fields ?? ['$'];
    this.clock = now ?? (() => Date.now());
  }

  now() {
    const t = this.clock();
    return t instanceof Date ? t.getTime() : t;
  }

  /** Every operation is checked before any runs: a bad one throws and nothing is written. */
  async batch(operations) {
    const checked = operations.map((op) => {
      if ('value' in op) {
        const remove = op.value === null || op.value === undefined;
        const bank = bankId(op.namespace, { put: !remove });
        checkKey(op.key);
        return { kind: 'put', op, bank, json: remove ? null : jsonText(op.value) };
      }
      if ('namespacePrefix' in op) return { kind: 'search', op, prefix: bankId(op.namespacePrefix, { allowEmpty: true }) };
      if ('key' in op) {
        checkKey(op.key);
        return { kind: 'get', op, bank: bankId(op.namespace) };
      }
      if ('limit' in op || 'matchConditions' in op) return { kind: 'namespaces', op };
      throw new HindsightError('invalid-input', `operation: not a get, search, put or list-namespaces operation: ${Object.keys(op).join(', ')}`, { field: 'operation' });
    });
    const results = [];
    for (const c of checked) {
      if (c.kind === 'put') results.push(this.#put(c.bank, c.op, c.json));
      else if (c.kind === 'get') results.push(this.#get(c.bank, c.op.key));
      else if (c.kind === 'search') results.push(this.#search(c.prefix, c.op));
      else results.push(this.#namespaces(c.op));
    }
    return results;
  }

  /** The active memories holding `key` in `bank`, newest first (one, unless a replacement was cut short). */
  #find(bank, key) {
    const { items } = this.hs.bank(bank).list({ tag: keyTag(key), limit: MAX_K });
    return items.filter((m) => keyOf(m) === key && m.tags.includes(ITEM)).sort((a, b) => b.createdAt - a.createdAt);
  }

  #get(bank, key) {
    const [memory] = this.#find(bank, key);
    return memory ? toItem(memory, bank) : null;
  }

  /** The new memory first (forced: stored as given), then the old ones erased: a failure loses nothing. */
  #put(bank, { key, value, index }, json) {
    const b = this.hs.bank(bank);
    const old = this.#find(bank, key);
    const now = this.now();
    if (json !== null) {
      const fields = index === undefined || index === null ? this.fields : index;
      const text = fields === false ? '' : fields.flatMap((f) => textsAt(value, f)).join('\n').trim();
      const created = old.length ? old.at(-1).metadata.find(([k]) => k === CREATED)?.[1] : undefined;
      const memory = {
        content: (text || json).slice(0, MAX_TEXT),
        context: json,
        tags: fields === false ? [ITEM, keyTag(key)] : [ITEM, INDEXED, keyTag(key)],
        metadata: [[KEY, key], [CREATED, created ?? String(now)]],
        kind: 'semantic',
        force: true,
      };
      try {
        b.retain([memory], { now });
      } catch (e) {
        if (e instanceof HindsightError && e.field === 'context') {
          throw new HindsightError('invalid-input', `value: its JSON text is ${Buffer.byteLength(json)} bytes, over the engine's limit (limits.max_content_bytes)`, { field: 'value' });
        }
        throw e;
      }
    }
    for (const m of old) b.forget(m.id, { hard: true, now });
  }

  /** The banks under a prefix ('' = all of them) that hold store items. */
  #banks(prefix) {
    return this.hs
      .banks()
      .filter((b) => prefix === '' || b === prefix || b.startsWith(`${prefix}:`))
      .filter((b) => this.hs.bank(b).list({ tag: ITEM, limit: 1 }).total > 0);
  }

  #search(prefix, { query, filter, limit = 10, offset = 0 }) {
    const banks = this.#banks(prefix);
    if (banks.length === 0) return [];
    let found;
    if (query) {
      const k = Math.min(MAX_K, filter ? MAX_K : offset + limit);
      const { items } = this.hs.recall({ banks, query, k, tags: [INDEXED], now: this.now() });
      found = items.filter(({ memory }) => keyOf(memory) !== undefined).map(({ memory, bank, score }) => toItem(memory, bank, score.total));
    } else {
      found = [];
      for (const bank of banks) {
        let cursor;
        do {
          const page = this.hs.bank(bank).list({ tag: ITEM, limit: MAX_K, cursor });
          found.push(...page.items.filter((m) => keyOf(m) !== undefined).map((m) => toItem(m, bank)));
          cursor = page.nextCursor;
        } while (cursor);
      }
      found.sort((a, b) => b.updatedAt - a.updatedAt);
    }
    const seen = new Set();
    return found
      .filter((item) => {
        const id = `${item.namespace.join(':')}\n${item.key}`;
        if (seen.has(id)) return false;
        seen.add(id);
        return matches(item.value, filter);
      })
      .slice(offset, offset + limit);
  }

  #namespaces({ matchConditions = [], maxDepth, limit = 100, offset = 0 }) {
    const fits = (ns, { matchType, path }) => {
      if (path.length > ns.length) return false;
      const start = matchType === 'suffix' ? ns.length - path.length : 0;
      return path.every((label, i) => label === '*' || label === ns[start + i]);
    };
    let namespaces = this.#banks('')
      .map((b) => b.split(':'))
      .filter((ns) => matchConditions.every((c) => fits(ns, c)));
    if (maxDepth !== undefined) namespaces = [...new Set(namespaces.map((ns) => ns.slice(0, maxDepth).join(':')))].map((ns) => ns.split(':'));
    namespaces.sort((a, b) => a.join(':').localeCompare(b.join(':')));
    return namespaces.slice(offset, offset + limit);
  }
}
