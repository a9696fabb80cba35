// A retrylab exec subject in Node (fetch): full-jitter retries.
//
// One client per process (RETRYLAB_BASE_URL, RETRYLAB_CLIENT) or, with
// fleet.processes, several (RETRYLAB_CLIENTS, RETRYLAB_BASE_URL_PREFIX),
// one async loop each. See docs/exec.md for the protocol.
const BASE = 100, CAP = 2000, ATTEMPTS = 10; // ms, ms, attempts per request
const RETRY = new Set([429, 500, 502, 503, 504]);
const env = process.env;

function clientsFrom(spec) { // RETRYLAB_CLIENTS: "0-3,8,12"
  const ids = [];
  for (const item of spec.split(",")) {
    const [lo, hi] = item.split("-").map(Number);
    for (let k = lo; k <= (hi ?? lo); k++) ids.push(k);
  }
  return ids;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function call(url, key) {
  const headers = key ? { Authorization: "Bearer " + key } : {};
  let reason = "";
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    try {
      const resp = await fetch(url, { headers, signal: AbortSignal.timeout(5000) });
      await resp.arrayBuffer();
      if (resp.ok) return [true, ""];
      if (!RETRY.has(resp.status)) return [false, `non-retryable ${resp.status}`];
      reason = `gave-up after ${attempt + 1} attempts (status ${resp.status})`;
    } catch (e) {
      reason = `gave-up after ${attempt + 1} attempts (${e.name})`;
    }
    if (attempt + 1 < ATTEMPTS) await sleep(Math.random() * Math.min(CAP, BASE * 2 ** attempt));
  }
  return [false, reason];
}

const n = Number(env.RETRYLAB_REQUESTS);
let plays;
if (env.RETRYLAB_CLIENTS !== undefined) {
  const keys = (env.RETRYLAB_API_KEYS ?? "").split(",");
  plays = clientsFrom(env.RETRYLAB_CLIENTS).map((k, i) => [env.RETRYLAB_BASE_URL_PREFIX + k, keys[i] ?? ""]);
} else {
  plays = [[env.RETRYLAB_BASE_URL, env.RETRYLAB_API_KEY ?? ""]];
}
process.stdout.write("ready\n");
await Promise.all(plays.map(async ([base, key]) => {
  for (let i = 0; i < n; i++) {
    const url = `${base}/r/${i}`; // names the client: right in both modes
    const [ok, reason] = await call(url, key);
    process.stdout.write(ok ? `ok ${url}\n` : `fail ${url} ${reason}\n`);
  }
}));
