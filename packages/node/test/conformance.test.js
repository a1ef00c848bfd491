// The behaviour every host shares, as data (tests/conformance): the store, the LLM client and
// the defaults.
import assert from 'node:assert/strict';
import { readFileSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { ENV, JSON_MODES, LLM_DEFAULTS, OPERATIONS, modelsDir } from '../src/defaults.js';
import { llmConfig } from '../src/llm.js';
import { complete } from '../src/llm-worker.js';
import { Conflict, SqliteStore } from '../src/store.js';

const data = (file) => JSON.parse(readFileSync(new URL(`../../../tests/conformance/${file}`, import.meta.url)));
const dir = mkdtempSync(join(tmpdir(), 'hindsight-conformance-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const bytes = (v) => (v && typeof v === 'object' ? Buffer.from(v.hex, 'hex') : Buffer.from(v, 'utf8'));
const shown = (b) => (b === undefined ? null : Buffer.from(b));

for (const [n, c] of data('store.json').cases.entries()) {
  test(`store: ${c.name}`, () => {
    const store = new SqliteStore(join(dir, `store-${n}.db`));
    for (const step of c.steps) {
      if (step.commit) {
        const ops = step.commit.map(([op, key, value]) =>
          op === 'put'
            ? { tag: 'put', val: [key, bytes(value)] }
            : op === 'delete'
              ? { tag: 'delete', val: key }
              : { tag: 'expect', val: [key, value === null ? undefined : bytes(value)] },
        );
        if (step.expect === 'conflict') assert.throws(() => store.commit(ops), Conflict, JSON.stringify(step));
        else store.commit(ops);
      } else if ('get' in step) {
        const want = step.expect === null ? null : bytes(step.expect);
        assert.deepEqual(shown(store.get(step.get)), want, JSON.stringify(step));
      } else {
        const got = store.scan(step.scan, step.start_after ?? undefined, step.limit);
        assert.deepEqual(
          got.map(([k, v]) => [k, Buffer.from(v)]),
          step.expect.map(([k, v]) => [k, bytes(v)]),
          JSON.stringify(step),
        );
      }
    }
    store.close();
  });
}

/** A server that gives `answers` in order and records each request (body and headers). */
async function server(answers) {
  const requests = [];
  const queue = [...answers];
  const s = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => (body += chunk));
    req.on('end', () => {
      requests.push({ body: JSON.parse(body), headers: req.headers });
      const a = queue.shift() ?? { status: 500, body_text: 'the transcript ran out' };
      const send = () => {
        if (res.destroyed) return;
        res.writeHead(a.status, { 'Content-Type': 'application/json', ...(a.headers || {}) });
        res.end(a.body_text ?? JSON.stringify(a.body));
      };
      if (a.delay_ms) setTimeout(send, a.delay_ms);
      else send();
    });
  });
  await new Promise((ok) => s.listen(0, '127.0.0.1', ok));
  return { url: `http://127.0.0.1:${s.address().port}/v1`, requests, close: () => {
      s.closeAllConnections();
      s.close();
    },
  };
}

const at = (value, path) => path.reduce((v, key) => (v === undefined || v === null ? undefined : v[key]), value);

const llm = data('llm.json');
for (const t of llm.transcripts) {
  test(`llm: ${t.name}`, async () => {
    const srv = await server(t.server);
    const c = t.config;
    const config = llmConfig({
      url: srv.url,
      model: c.model,
      models: c.models,
      apiKey: c.api_key,
      jsonMode: c.json_mode,
      retries: c.retries,
      timeoutMs: c.timeout_ms,
      backoffMs: c.backoff_ms,
    });
    const r = { ...llm.default_request, ...(t.request || {}) };
    const request = {
      operation: r.operation,
      system: r.system,
      prompt: r.prompt,
      jsonSchema: r.json_schema,
      maxTokens: r.max_tokens,
      temperature: r.temperature,
    };
    try {
      if (t.expect.failed) {
        await assert.rejects(complete(config, request), (e) => {
          for (const part of t.expect.failed) assert.ok(e.message.includes(part), `${part} not in ${e.message}`);
          return true;
        });
      } else {
        const got = await complete(config, request);
        assert.deepEqual(got, {
          text: t.expect.text,
          promptTokens: t.expect.prompt_tokens,
          completionTokens: t.expect.completion_tokens,
        });
      }
      assert.equal(srv.requests.length, t.requests.count);
      for (const check of t.requests.checks || []) {
        const req = srv.requests[check.index];
        const value = check.header ? req.headers[check.header] : at(req.body, check.path);
        if (check.absent) assert.equal(value, undefined, JSON.stringify(check));
        else assert.deepEqual(value, check.equals, JSON.stringify(check));
      }
    } finally {
      srv.close();
    }
  });
}

test('defaults are the table every host shares', () => {
  const d = data('defaults.json');
  assert.equal(ENV.models, d.models_dir.env);
  assert.equal(ENV.cache, d.models_dir.cache_env);
  assert.equal(modelsDir({ [d.models_dir.env]: '/m' }), '/m');
  assert.equal(modelsDir({ [d.models_dir.cache_env]: '/c' }), join('/c', ...d.models_dir.subdir));
  assert.deepEqual(
    [ENV.llmUrl, ENV.llmModel, ENV.llmApiKey, ENV.llmModelPrefix, ENV.llmTimeoutMs, ENV.llmRetries, ENV.llmJsonMode],
    [d.llm_env.url, d.llm_env.model, d.llm_env.api_key, d.llm_env.model_per_operation_prefix, d.llm_env.timeout_ms, d.llm_env.retries, d.llm_env.json_mode],
  );
  assert.equal(ENV.db, d.db_env);
  assert.equal(LLM_DEFAULTS.model, d.llm.model);
  assert.equal(LLM_DEFAULTS.timeoutMs, d.llm.timeout_ms);
  assert.equal(LLM_DEFAULTS.retries, d.llm.retries);
  assert.equal(LLM_DEFAULTS.backoffMs, d.llm.backoff_first_ms);
  assert.equal(LLM_DEFAULTS.maxBackoffMs, d.llm.backoff_max_ms);
  assert.equal(LLM_DEFAULTS.jsonMode, d.llm.json_mode);
  assert.deepEqual([...JSON_MODES], d.llm.json_modes);
  assert.deepEqual([...OPERATIONS], d.llm.operations);
  // d.engine (the call deadline, the memory cap): jco has no epoch interruption or memory
  // limiter, so Node enforces neither (the README says so); the LLM timeout bounds LLM calls.
});
