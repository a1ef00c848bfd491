import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

/** The component: $HINDSIGHT_WASM, else the repository's build (`./dev component`). */
export function wasmPath() {
  return process.env.HINDSIGHT_WASM || join(repo, 'guest', 'component', 'hindsight.wasm');
}

/** The model directory, found as the Rust host finds it. */
export function modelsDir() {
  if (process.env.HINDSIGHT_MODELS) return process.env.HINDSIGHT_MODELS;
  return join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'hindsight', 'models');
}
