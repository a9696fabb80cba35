// startServe runs one `retrylab serve` for a test file and drives its
// control API (/_retrylab/): reset(scenario) starts a fresh recording,
// verdict() judges it, assertVerdict checks the verdict and failed checks.
//
// retrylab is $RETRYLAB, else on PATH. When it is missing the tests skip,
// except under CI=true, where they fail: a gate that skips is no gate.
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { readFile } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import assert from 'node:assert/strict';

export const SCENARIOS = fileURLToPath(new URL('../scenarios/', import.meta.url));
export const RETRYLAB = process.env.RETRYLAB || 'retrylab';

// missing returns why the tests cannot run (retrylab not found), or ''.
export function missing() {
  const r = spawnSync(RETRYLAB, ['version'], { encoding: 'utf8' });
  if (!r.error) return '';
  const why = `${RETRYLAB} cannot run (${r.error.code}): put retrylab on PATH or set $RETRYLAB`;
  if (process.env.CI === 'true') throw new Error(why + ' (CI=true: not skipped)');
  return why;
}

export async function startServe() {
  // Port 0: the OS picks a free port; serve prints the URL on its first line:
  //   retrylab: serving "default" on http://127.0.0.1:41234
  const proc = spawn(RETRYLAB, ['serve', '--addr', '127.0.0.1:0', '--duration', '10m'], { stdio: ['ignore', 'pipe', 'inherit'] });
  const lines = createInterface({ input: proc.stdout });
  const [first] = await once(lines, 'line');
  lines.on('line', () => {}); // keep draining
  const m = / on (http:\/\/\S+)/.exec(first);
  if (!m) {
    proc.kill('SIGINT');
    throw new Error(`retrylab serve printed ${JSON.stringify(first)}; want its URL`);
  }
  const base = m[1];

  async function call(method, path, body, contentType) {
    const res = await fetch(`${base}/_retrylab/${path}`, { method, body, headers: contentType ? { 'content-type': contentType } : {} });
    const text = await res.text();
    if (!res.ok) throw new Error(`${method} /_retrylab/${path}: ${res.status} ${text}`);
    return JSON.parse(text);
  }
  await call('GET', ''); // the control API is there

  return {
    base,
    clientURL: (client) => `${base}/c/${client}`,
    // reset starts a new recording (and the phases' clock): a file under
    // examples/scenarios (name without .yaml) or a built-in name.
    async reset(name) {
      let yaml;
      try {
        yaml = await readFile(`${SCENARIOS}${name}.yaml`);
      } catch {
        return call('POST', `reset?scenario=${encodeURIComponent(name)}`);
      }
      return call('POST', 'reset', yaml, 'application/yaml');
    },
    verdict: () => call('GET', 'verdict'), // `retrylab analyze --json`'s JSON
    // fleet runs fn(clientURL) for clients 0..n-1 at once (clients that
    // start together are what makes waves).
    fleet: (n, fn) => Promise.all(Array.from({ length: n }, (_, i) => fn(`${base}/c/${i}`))),
    // assertVerdict(t, want, ...failed): on a host too loaded to judge
    // (INCONCLUSIVE, with the host's noise among the reasons) the test is
    // skipped saying so, and null returned: noise never passes or fails it.
    async assertVerdict(t, want, ...failed) {
      const v = await this.verdict();
      const noise = skipForNoise(v, want);
      if (noise) {
        t.skip(noise);
        return null;
      }
      const got = v.checks.filter((c) => c.status === 'fail').map((c) => c.id);
      const detail = v.checks.filter((c) => c.status !== 'skip').map((c) => `  ${c.status} ${c.id}: ${c.reason ?? ''}`)
        .concat((v.inconclusive ?? []).map((r) => `  inconclusive: ${r}`)).join('\n');
      assert.equal(v.verdict, want, `verdict ${v.verdict}, want ${want}; failed [${got}]\n${detail}`);
      for (const id of failed) assert.ok(got.includes(id), `failed checks [${got}], want ${id} among them\n${detail}`);
      return v;
    },
    async stop() {
      proc.kill('SIGINT'); // serve shuts down gracefully on SIGINT
      await once(proc, 'exit');
    },
  };
}

// skipForNoise is why a test wanting `want` cannot be judged on this host
// (an INCONCLUSIVE verdict that names the host's noise), or ''.
export function skipForNoise(v, want) {
  if (v.verdict !== 'inconclusive' || want === 'inconclusive') return '';
  const r = (v.inconclusive ?? []).find((x) => x.includes('noise'));
  return r ? `host noise: ${r}` : '';
}
