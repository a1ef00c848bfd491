// One table of defaults, the same in every host (tests/conformance/defaults.json pins them).
import { homedir } from 'node:os';
import { join } from 'node:path';

export const LLM_DEFAULTS = Object.freeze({
  model: 'default',
  timeoutMs: 30_000,
  retries: 2,
  backoffMs: 500,
  maxBackoffMs: 8_000,
  jsonMode: 'json_schema',
});
export const JSON_MODES = Object.freeze(['json_schema', 'json_object', 'none']);
export const OPERATIONS = Object.freeze(['extract', 'importance', 'consolidate', 'judge']);

export const ENV = Object.freeze({
  models: 'HINDSIGHT_MODELS',
  cache: 'XDG_CACHE_HOME',
  db: 'HINDSIGHT_DB',
  llmUrl: 'HINDSIGHT_LLM_URL',
  llmModel: 'HINDSIGHT_LLM_MODEL',
  llmApiKey: 'HINDSIGHT_LLM_API_KEY',
  llmModelPrefix: 'HINDSIGHT_LLM_MODEL_',
  llmTimeoutMs: 'HINDSIGHT_LLM_TIMEOUT_MS',
  llmRetries: 'HINDSIGHT_LLM_RETRIES',
  llmJsonMode: 'HINDSIGHT_LLM_JSON_MODE',
});

/** The model directory, the rule every host follows: $HINDSIGHT_MODELS, else the per-user cache. */
export function modelsDir(env = process.env) {
  if (env[ENV.models]) return env[ENV.models];
  return join(env[ENV.cache] || join(homedir(), '.cache'), 'hindsight', 'models');
}
