// The cross-host bench (examples/parity/scenario.json, "bench"), measured as the Rust host's
// `cargo run -p hindsight-dev --example host_bench` measures it.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Hindsight } from '../src/index.js';
import { memories, scenario } from '../test/scenario.js';

const dir = mkdtempSync(join(tmpdir(), 'hindsight-bench-'));
const { copies, runs, k } = scenario.bench;

let t = performance.now();
const hs = await Hindsight.open({ db: join(dir, 'bench.db'), llm: null });
const loadMs = performance.now() - t; // read the files, compile the core modules, instantiate
t = performance.now();
hs.modelId(); // engine.create: the model loads inside the guest
const createMs = performance.now() - t;

const bank = hs.bank(scenario.bank);
t = performance.now();
for (let i = 0; i < copies; i++) {
  bank.retain(memories().map((m) => ({ ...m, content: `${m.content} (case ${i})`, force: true })), { now: scenario.now });
}
const retainS = (performance.now() - t) / 1000;

const queries = scenario.queries.map((q) => q.query);
bank.recall(queries[0], { k, now: scenario.now });
const ms = [];
for (let i = 0; i < runs; i++) {
  t = performance.now();
  bank.recall(queries[i % queries.length], { k, now: scenario.now });
  ms.push(performance.now() - t);
}
ms.sort((a, b) => a - b);
const pct = (p) => ms[Math.round((ms.length - 1) * p)];
console.log(JSON.stringify({
  host: `node ${process.version} (jco)`,
  component_load_ms: loadMs,
  instantiate_ms: createMs,
  memories: copies * scenario.memories.length,
  retain_s: retainS,
  recall_p50_ms: pct(0.5),
  recall_p95_ms: pct(0.95),
}, null, 2));
hs.close();
rmSync(dir, { recursive: true, force: true });
