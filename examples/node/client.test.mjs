// The fetch retry loop (client.mjs) against `retrylab serve`: the good
// policy passes, each common mistake fails the check that names it.
// Run: node --test examples/node
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { backoffMs, clientsFromEnv, getWithRetries, GOOD, MISTAKES, parseClients, retryAfterMs } from './client.mjs';
import { missing, RETRYLAB, SCENARIOS, startServe } from './serve.mjs';

const skip = missing() || false; // a reason skips the suites below

// A simulated client: n logical requests, one after another.
const requestsOf = (n, policy = GOOD) => async (url) => {
  const out = [];
  for (let i = 0; i < n; i++) out.push(await getWithRetries(`${url}/r/${i}`, policy));
  return out;
};

test('Retry-After in both forms', () => {
  const now = Date.parse('2026-10-21T07:28:00Z');
  assert.equal(retryAfterMs('3', now), 3000);
  assert.equal(retryAfterMs('Wed, 21 Oct 2026 07:28:05 GMT', now), 5000);
  for (const v of [null, '', '0', '-1', '1.5', 'soon', '2026-10-21T07:29:00Z', 'Wed, 21 Oct 2026 07:27:00 GMT']) {
    assert.equal(retryAfterMs(v, now), null, v); // paces nothing: fall back to backoff
  }
});

test('full jitter', () => {
  const waits = Array.from({ length: 1000 }, () => backoffMs(GOOD, 3));
  assert.ok(Math.min(...waits) < 50 && Math.max(...waits) > 950 && Math.max(...waits) <= 1000);
  assert.equal(backoffMs(MISTAKES['no-jitter'], 3), 1000);
});

test('claims the wait it meant (X-Retrylab-Wait)', async () => {
  const { createServer } = await import('node:http');
  const seen = [];
  const srv = createServer((req, res) => {
    seen.push(req.headers['x-retrylab-wait']);
    res.writeHead(seen.length % 3 ? 503 : 200).end();
  });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  try {
    const url = `http://127.0.0.1:${srv.address().port}/r/0`;
    const policy = { ...GOOD, base: 10, cap: 20, jitter: false };
    assert.ok((await getWithRetries(url, policy, {}, { claimWaits: true })).ok);
    assert.deepEqual(seen, [undefined, '10.000', '20.000']);
    seen.length = 0;
    assert.ok((await getWithRetries(url, policy)).ok);
    assert.deepEqual(seen, [undefined, undefined, undefined]);
  } finally {
    srv.close();
  }
});

test('one client or many (RETRYLAB_CLIENTS)', () => {
  assert.deepEqual(parseClients('0-3,8,12'), [0, 1, 2, 3, 8, 12]);
  assert.deepEqual(clientsFromEnv({ RETRYLAB_BASE_URL: 'http://h/c/7', RETRYLAB_CLIENT: '7' }),
    [{ id: 7, base: 'http://h/c/7', key: '' }]);
  assert.deepEqual(clientsFromEnv({ RETRYLAB_CLIENTS: '1,5', RETRYLAB_BASE_URL_PREFIX: 'http://h/c/', RETRYLAB_API_KEYS: 'k1,k5' }),
    [{ id: 1, base: 'http://h/c/1', key: 'k1' }, { id: 5, base: 'http://h/c/5', key: 'k5' }]);
});

describe('against retrylab serve', { skip }, () => {
  let serve;
  before(async () => { serve = await startServe(); });
  after(async () => { await serve?.stop(); });

  test('good policy waits as Retry-After says', async (t) => {
    await serve.reset('outage');
    const results = (await serve.fleet(4, requestsOf(2))).flat();
    assert.ok(results.every((r) => r.ok), JSON.stringify(results));
    await serve.assertVerdict(t, 'pass');
  });

  test('ignoring Retry-After fails retry-after', async (t) => {
    await serve.reset('outage');
    await serve.fleet(4, requestsOf(2, MISTAKES['ignore-retry-after']));
    await serve.assertVerdict(t, 'fail', 'retry-after');
  });

  test('good policy does not retry 404', async (t) => {
    await serve.reset('not-found');
    const results = (await serve.fleet(2, requestsOf(12))).flat();
    assert.deepEqual([...new Set(results.filter((r) => !r.ok).map((r) => r.reason))], ['non-retryable']);
    await serve.assertVerdict(t, 'pass');
  });

  test('retrying 404 fails non-retryable', async (t) => {
    await serve.reset('not-found');
    await serve.fleet(2, requestsOf(12, MISTAKES['retry-4xx']));
    await serve.assertVerdict(t, 'fail', 'non-retryable');
  });

  test('good policy spreads its retries', async (t) => {
    await serve.reset('bare');
    await serve.fleet(24, requestsOf(1));
    const v = await serve.assertVerdict(t, 'pass');
    if (v) assert.equal(v.checks.find((c) => c.id === 'waves').status, 'pass');
  });

  test('retrying at once fails instant-retry', async (t) => {
    await serve.reset('bare');
    await serve.fleet(4, requestsOf(1, MISTAKES['no-backoff'])); // few clients: instant retries need no crowd
    await serve.assertVerdict(t, 'fail', 'instant-retry');
  });

  test('backoff without jitter fails waves', async (t) => {
    await serve.reset('bare');
    await serve.fleet(24, requestsOf(1, MISTAKES['no-jitter']));
    await serve.assertVerdict(t, 'fail', 'waves');
  });
});

// The exec route: retrylab starts the program once per simulated client and
// judges the run itself; its exit status is the verdict (0 PASS, 1 FAIL,
// 3 INCONCLUSIVE).
describe('retrylab run --subject exec:node client.mjs', { skip }, () => {
  const client = fileURLToPath(new URL('client.mjs', import.meta.url));
  const run = (...args) => spawnSync(RETRYLAB, ['run', join(SCENARIOS, 'outage.yaml'),
    '--subject', ['exec:' + process.execPath, client, ...args].join(' '),
    '--clients', '2', '--no-report', '--quiet', '--out', mkdtempSync(join(tmpdir(), 'retrylab-'))],
  { encoding: 'utf8', timeout: 60000 });

  // Exit 3 (INCONCLUSIVE) naming the host's noise: too loaded to judge.
  const noisy = (t, r) => r.status === 3 && /noise/.test(r.stdout) && (t.skip('host noise: the run was INCONCLUSIVE'), true);

  test('good policy exits 0', (t) => {
    const r = run();
    if (noisy(t, r)) return;
    assert.equal(r.status, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /retrylab verdict: PASS/);
  });

  test('a mistake exits 1 naming the check', (t) => {
    const r = run('--mistake', 'ignore-retry-after');
    if (noisy(t, r)) return;
    assert.equal(r.status, 1, r.stdout + r.stderr);
    assert.match(r.stdout, /retrylab verdict: FAIL/);
    assert.match(r.stdout, /✗ retry-after/);
  });
});
