"""The stdlib retry loop (client.py) against `retrylab serve`: the good
policy passes, each common mistake fails the check that names it."""

import os
import pathlib
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pytest

import client

HERE = pathlib.Path(__file__).resolve().parent


def requests_of(n, policy=client.Policy()):
    """A simulated client: n logical requests, one after another."""
    return lambda url: [client.get_with_retries(f"{url}/r/{i}", policy) for i in range(n)]


def test_retry_after_forms():
    now = datetime(2026, 10, 21, 7, 28, 0, tzinfo=timezone.utc)
    assert client.retry_after_seconds("3", now) == 3
    assert client.retry_after_seconds("Wed, 21 Oct 2026 07:28:05 GMT", now) == 5
    # Values that pace nothing: fall back to backoff.
    for v in [None, "", "0", "-1", "1.5", "soon", "Wed, 21 Oct 2026 07:27:00 GMT"]:
        assert client.retry_after_seconds(v, now) is None, v


def test_backoff_has_full_jitter():
    import random

    rng = random.Random(1)
    waits = [client.backoff(client.Policy(), 3, rng) for _ in range(1000)]
    assert 0 <= min(waits) < 0.05 and 0.95 < max(waits) <= 1.0  # uniform on [0, 0.25 * 2**2]
    assert client.backoff(client.MISTAKES["no-jitter"], 3, rng) == 1.0


def test_one_client_or_many():
    assert client.parse_clients("0-3,8,12") == [0, 1, 2, 3, 8, 12]
    one = {"RETRYLAB_BASE_URL": "http://h/c/7", "RETRYLAB_CLIENT": "7"}
    assert client.clients_from_env(one) == [(7, "http://h/c/7", "")]
    many = {"RETRYLAB_CLIENTS": "1,5", "RETRYLAB_BASE_URL_PREFIX": "http://h/c/", "RETRYLAB_API_KEYS": "k1,k5"}
    assert client.clients_from_env(many) == [(1, "http://h/c/1", "k1"), (5, "http://h/c/5", "k5")]


@pytest.mark.scenario("outage")
def test_good_policy_waits_as_retry_after_says(retrylab):
    results = retrylab.fleet(4, requests_of(2))
    assert all(r.ok for rs in results for r in rs), results
    retrylab.assert_verdict("pass")


@pytest.mark.scenario("outage")
def test_ignoring_retry_after_fails_retry_after(retrylab):
    retrylab.fleet(4, requests_of(2, client.MISTAKES["ignore-retry-after"]))
    retrylab.assert_verdict("fail", "retry-after")


@pytest.mark.scenario("not-found")
def test_good_policy_does_not_retry_404(retrylab):
    results = retrylab.fleet(2, requests_of(12))
    reasons = {r.reason for rs in results for r in rs if not r.ok}
    assert reasons == {"non-retryable"}, reasons
    retrylab.assert_verdict("pass")


@pytest.mark.scenario("not-found")
def test_retrying_404_fails_non_retryable(retrylab):
    retrylab.fleet(2, requests_of(12, client.MISTAKES["retry-4xx"]))
    retrylab.assert_verdict("fail", "non-retryable")


@pytest.mark.scenario("bare")
def test_good_policy_spreads_its_retries(retrylab):
    retrylab.fleet(24, requests_of(1))
    v = retrylab.assert_verdict("pass")
    assert {c["id"]: c["status"] for c in v["checks"]}["waves"] == "pass"


@pytest.mark.scenario("bare")
def test_retrying_at_once_fails_instant_retry(retrylab):
    retrylab.fleet(4, requests_of(1, client.MISTAKES["no-backoff"]))  # few clients: instant retries need no crowd
    retrylab.assert_verdict("fail", "instant-retry")


@pytest.mark.scenario("bare")
def test_backoff_without_jitter_fails_waves(retrylab):
    retrylab.fleet(24, requests_of(1, client.MISTAKES["no-jitter"]))
    retrylab.assert_verdict("fail", "waves")


# The exec route: retrylab starts the program once per simulated client and
# judges the run itself; its exit status is the verdict (0 PASS, 1 FAIL,
# 3 INCONCLUSIVE).


def retrylab_run(exe, out, *subject_args):
    subject = "exec:" + " ".join([sys.executable, str(HERE / "client.py"), *subject_args])
    scenario = HERE.parent / "scenarios" / "outage.yaml"
    cmd = [exe, "run", str(scenario), "--subject", subject, "--clients", "2", "--no-report", "--quiet", "--out", str(out)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def skip_if_noisy(p):
    """Exit 3 (INCONCLUSIVE) naming the host's noise: too loaded to judge."""
    if p.returncode == 3 and "noise" in p.stdout:
        pytest.skip("host noise: the run was INCONCLUSIVE")


def test_exec_route_good_policy_exits_0(retrylab_exe, tmp_path):
    p = retrylab_run(retrylab_exe, tmp_path)
    skip_if_noisy(p)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "retrylab verdict: PASS" in p.stdout


def test_exec_route_mistake_exits_1(retrylab_exe, tmp_path):
    p = retrylab_run(retrylab_exe, tmp_path, "--mistake", "ignore-retry-after")
    skip_if_noisy(p)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "retrylab verdict: FAIL" in p.stdout
    assert "✗ retry-after" in p.stdout  # what the user reads: ✗ retry-after.... N early retries > 0


def test_claims_the_wait_it_meant():
    """With claim_waits each retry names the wait drawn before it; the
    first attempt, and every attempt without claim_waits, none."""
    import http.server
    import random
    import threading

    seen = []

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append(self.headers.get("X-Retrylab-Wait"))
            self.send_response(503 if len(seen) % 3 else 200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{srv.server_address[1]}/r/0"
        policy = client.Policy(base=0.01, cap=0.02)
        assert client.get_with_retries(url, policy, rng=random.Random(1), claim_waits=True).ok
        rng = random.Random(1)
        want = [f"{client.backoff(policy, k, rng) * 1000:.3f}" for k in (1, 2)]
        assert seen == [None] + want, seen
        seen.clear()
        assert client.get_with_retries(url, policy, rng=random.Random(1)).ok
        assert seen == [None, None, None], seen
    finally:
        srv.shutdown()
