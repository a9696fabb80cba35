// A retry loop on Node's global fetch (Node 18+), and the mistakes
// retrylab catches. getWithRetries(url) is the policy to copy; it
//   - retries only 429 and 5xx answers (500, 502, 503, 504) and network
//     errors, never another 4xx (it cannot succeed later);
//   - honours Retry-After in both forms, delay-seconds ("120") and HTTP-date
//     ("Wed, 21 Oct 2026 07:28:00 GMT"); a value that paces nothing
//     (malformed, negative, fractional, a past date, 0) falls back to backoff;
//   - backs off with full jitter: a random wait in [0, min(cap, base * 2^n)];
//   - caps the attempts (maxAttempts) and the total time (budget): a wait
//     that would cross the budget gives up at once.
// With claimWaits (on when it runs under retrylab) each retry also sends
// X-Retrylab-Wait, the milliseconds it meant to wait after the previous
// answer: retrylab reads the client's own waits from it, apart from the
// lateness a busy host adds (docs/exec.md). Leave it off in production.
//
// Run as a program it speaks retrylab's exec protocol (docs/exec.md); with
// --processes (RETRYLAB_CLIENTS set) it plays several clients at once, one
// async task each, as a service instance would:
//   retrylab run examples/scenarios/outage.yaml --subject 'exec:node examples/node/client.mjs'
//   retrylab run examples/scenarios/outage.yaml --subject 'exec:node examples/node/client.mjs --mistake ignore-retry-after'
//   retrylab run examples/scenarios/bare.yaml --subject 'exec:node examples/node/client.mjs' --clients 50 --processes 4
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';

export const RETRYABLE = new Set([429, 500, 502, 503, 504]);

export const GOOD = Object.freeze({
  base: 250, // ms: first backoff ceiling
  cap: 4000, // ms: largest backoff ceiling
  maxAttempts: 5, // per call, the first included
  budget: 10000, // ms per call, waits included
  timeout: 5000, // ms per attempt
  retryAfterJitter: 200, // ms added to a Retry-After wait, so a fleet told the same instant spreads
  // The switches below are the mistakes; the defaults are right.
  honourRetryAfter: true,
  jitter: true,
  retryAnyError: false,
});

export const MISTAKES = {
  // Backs off on its own schedule whatever the server says (check: retry-after).
  'ignore-retry-after': { ...GOOD, honourRetryAfter: false },
  // Retries 404 and the other 4xx, which can never succeed (check: non-retryable).
  'retry-4xx': { ...GOOD, retryAnyError: true },
  // Exponential backoff without jitter: clients that failed together come
  // back together (check: waves).
  'no-jitter': { ...GOOD, jitter: false },
  // Retries at once when nothing says how long to wait (check: instant-retry).
  'no-backoff': { ...GOOD, base: 0, cap: 0 },
};

// retryAfterMs returns the wait a Retry-After value asks for, in ms, or
// null when it paces nothing (absent, malformed, negative, fractional,
// past, zero).
export function retryAfterMs(value, now = Date.now()) {
  if (value == null) return null;
  const v = value.trim();
  let wait;
  if (/^[0-9]+$/.test(v)) {
    wait = Number(v) * 1000; // delay-seconds: 1*DIGIT, nothing else
  } else if (/^[A-Za-z]{3}, \d{2} [A-Za-z]{3} \d{4} \d{2}:\d{2}:\d{2} GMT$/.test(v)) {
    wait = Date.parse(v) - now; // IMF-fixdate; Date.parse alone accepts far too much
  } else {
    return null;
  }
  return Number.isFinite(wait) && wait > 0 ? wait : null;
}

// backoffMs is the wait before retry number `retry` (1 for the first).
export function backoffMs(policy, retry, random = Math.random) {
  const ceiling = Math.min(policy.cap, policy.base * 2 ** (retry - 1));
  return policy.jitter ? random() * ceiling : ceiling;
}

// getWithRetries resolves to {ok, status, attempts, reason}; reason (when
// not ok) is gave-up, budget, non-retryable or error.
export async function getWithRetries(url, policy = GOOD, headers = {}, { claimWaits = false } = {}) {
  const deadline = Date.now() + policy.budget;
  let status = 0;
  let claim = {}; // the X-Retrylab-Wait of the next attempt
  for (let attempt = 1; attempt <= policy.maxAttempts; attempt++) {
    let retryAfter = null;
    try {
      const res = await fetch(url, { headers: { ...headers, ...claim }, signal: AbortSignal.timeout(policy.timeout) });
      await res.arrayBuffer(); // read the body: the connection is reused
      status = res.status;
      if (res.ok) return { ok: true, status, attempts: attempt };
      if (!RETRYABLE.has(status) && !(policy.retryAnyError && status >= 400)) {
        return { ok: false, status, attempts: attempt, reason: 'non-retryable' };
      }
      retryAfter = res.headers.get('retry-after');
    } catch {
      status = 0; // no answer: reset, refused, timed out; retried
    }
    if (attempt === policy.maxAttempts) break;
    let wait = policy.honourRetryAfter ? retryAfterMs(retryAfter) : null;
    wait = wait != null ? wait + Math.random() * policy.retryAfterJitter : backoffMs(policy, attempt);
    if (Date.now() + wait > deadline) return { ok: false, status, attempts: attempt, reason: 'budget' };
    if (claimWaits) claim = { 'x-retrylab-wait': wait.toFixed(3) };
    await sleep(wait);
  }
  return { ok: false, status, attempts: policy.maxAttempts, reason: 'gave-up' };
}

// parseClients reads RETRYLAB_CLIENTS: "0-3,8,12" is [0, 1, 2, 3, 8, 12].
export function parseClients(value) {
  const ids = [];
  for (const item of value.split(',')) {
    const [lo, hi = lo] = item.split('-').map(Number);
    for (let k = lo; k <= hi; k++) ids.push(k);
  }
  return ids;
}

// clientsFromEnv is the clients this process plays, each {id, base, key}:
// several when RETRYLAB_CLIENTS is set (docs/exec.md, "Many clients per
// process"), else the one of RETRYLAB_BASE_URL and RETRYLAB_CLIENT.
export function clientsFromEnv(env) {
  if (env.RETRYLAB_CLIENTS !== undefined) {
    const ids = parseClients(env.RETRYLAB_CLIENTS);
    const keys = env.RETRYLAB_API_KEYS ? env.RETRYLAB_API_KEYS.split(',') : [];
    return ids.map((id, j) => ({ id, base: `${env.RETRYLAB_BASE_URL_PREFIX}${id}`, key: keys[j] ?? '' }));
  }
  return [{ id: Number(env.RETRYLAB_CLIENT ?? '0'), base: env.RETRYLAB_BASE_URL, key: env.RETRYLAB_API_KEY ?? '' }];
}

async function main(argv) {
  const i = argv.indexOf('--mistake');
  const policy = i >= 0 ? MISTAKES[argv[i + 1]] : GOOD;
  if (!policy) throw new Error(`--mistake ${argv[i + 1]}: want one of ${Object.keys(MISTAKES).join(', ')}`);
  const n = Number(process.env.RETRYLAB_REQUESTS ?? '1');
  const play = async ({ id, base, key }) => {
    const headers = key ? { authorization: `Bearer ${key}` } : {};
    for (let r = 0; r < n; r++) {
      const res = await getWithRetries(`${base}/r/${r}`, policy, headers, { claimWaits: true });
      const path = `/c/${id}/r/${r}`; // names its client: required when a process plays several
      console.log(res.ok ? `ok ${path}` : `fail ${path} ${res.reason} (status ${res.status}, ${res.attempts} attempts)`);
    }
  };
  console.log('ready'); // the start barrier: the phases start when every client is ready
  await Promise.all(clientsFromEnv(process.env).map(play));
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  await main(process.argv.slice(2));
}
