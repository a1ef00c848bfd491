// Transpiles the component the Rust host builds into JS + core wasm in generated/ (what the
// package ships). The wasm: $HINDSIGHT_WASM, else the repository's build (`./dev component`).
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const wasm = process.env.HINDSIGHT_WASM || join(root, '..', '..', 'guest', 'component', 'hindsight.wasm');
if (!existsSync(wasm)) {
  console.error(`no component at ${wasm}: run \`./dev component\` in the repository first, or set HINDSIGHT_WASM`);
  process.exit(1);
}
// --instantiation: the store and llm imports are objects handed in per instance, not modules.
execFileSync(
  join(root, 'node_modules', '.bin', 'jco'),
  ['transpile', wasm, '--name', 'hindsight', '--instantiation', 'async', '--quiet', '-o', join(root, 'generated')],
  { stdio: 'inherit' },
);
