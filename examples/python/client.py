#!/usr/bin/env python3
"""A retry loop on the standard library (urllib), and the mistakes retrylab catches.

get_with_retries(url) is the policy to copy. It
  * retries only 429 and 5xx answers (500, 502, 503, 504) and connection
    errors; never another 4xx (it cannot succeed later);
  * honours Retry-After in both forms, delay-seconds ("120") and HTTP-date
    ("Wed, 21 Oct 2026 07:28:00 GMT"); a value that paces nothing
    (malformed, negative, fractional, a past date, 0) falls back to backoff;
  * backs off with full jitter: a random wait in [0, min(cap, base * 2**n)],
    so a fleet that failed together does not come back together;
  * caps the attempts (max_attempts) and the total time (budget): a wait
    that would cross the budget gives up at once instead of sleeping past it.

With claim_waits (on when it runs under retrylab) each retry also sends
X-Retrylab-Wait, the milliseconds it meant to wait after the previous
answer: retrylab reads the client's own waits from it, apart from the
lateness a busy host adds (docs/exec.md). Leave it off in production.

MISTAKES holds the same loop with one common mistake each; the tests show
the check of retrylab's that catches it.

Run as a program it speaks retrylab's exec protocol (docs/exec.md): it
requests $RETRYLAB_BASE_URL/r/0 .. /r/N-1 and prints one result line each;
with --processes (RETRYLAB_CLIENTS set) it plays several clients at once,
one thread each, as a service instance would.

    retrylab run examples/scenarios/outage.yaml --subject 'exec:python3 examples/python/client.py'
    retrylab run examples/scenarios/outage.yaml --subject 'exec:python3 examples/python/client.py --mistake ignore-retry-after'
    retrylab run examples/scenarios/bare.yaml --subject 'exec:python3 examples/python/client.py' --clients 50 --processes 4
"""

import argparse
import dataclasses
import email.utils
import http.client
import os
import random
import sys
import threading
import time
import urllib.error
import urllib.request
from datetime import datetime, timezone

RETRYABLE = frozenset({429, 500, 502, 503, 504})


@dataclasses.dataclass(frozen=True)
class Policy:
    base: float = 0.25  # first backoff ceiling, seconds
    cap: float = 4.0  # largest backoff ceiling
    max_attempts: int = 5  # attempts per call, the first included
    budget: float = 10.0  # seconds per call, waits included
    timeout: float = 5.0  # per attempt
    retry_after_jitter: float = 0.2  # added to a Retry-After wait, so a fleet told the same instant spreads
    # The switches below are the mistakes; the defaults are right.
    honour_retry_after: bool = True
    jitter: bool = True
    retry_any_error: bool = False  # retry every 4xx too


MISTAKES = {
    # Backs off on its own schedule whatever the server says: comes back
    # before the instant Retry-After named (check: retry-after).
    "ignore-retry-after": Policy(honour_retry_after=False),
    # Retries 404 and the other 4xx, which can never succeed
    # (check: non-retryable).
    "retry-4xx": Policy(retry_any_error=True),
    # Exponential backoff without jitter: clients that failed together come
    # back together, wave after wave (check: waves).
    "no-jitter": Policy(jitter=False),
    # Retries at once when nothing says how long to wait (check: instant-retry).
    "no-backoff": Policy(base=0.0, cap=0.0),
}


@dataclasses.dataclass
class Result:
    ok: bool
    status: int  # the last status, 0 when no answer came
    attempts: int
    reason: str = ""  # when not ok: gave-up, budget, non-retryable or error


def retry_after_seconds(value, now=None):
    """The wait a Retry-After value asks for, in seconds, or None when it
    paces nothing (absent, malformed, negative, fractional, past, zero)."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():  # delay-seconds: 1*DIGIT, nothing else
        wait = float(int(value))
    else:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:  # an HTTP-date is always GMT
            when = when.replace(tzinfo=timezone.utc)
        wait = (when - (now or datetime.now(timezone.utc))).total_seconds()
    return wait if wait > 0 else None


def backoff(policy, retry, rng):
    """The wait before retry number `retry` (1 for the first retry)."""
    ceiling = min(policy.cap, policy.base * 2 ** (retry - 1))
    return rng.uniform(0, ceiling) if policy.jitter else ceiling


def get_with_retries(url, policy=Policy(), headers=None, rng=random, claim_waits=False):
    deadline = time.monotonic() + policy.budget
    status = 0
    claim = {}  # the X-Retrylab-Wait of the next attempt
    for attempt in range(1, policy.max_attempts + 1):
        retry_after = None
        try:
            req = urllib.request.Request(url, headers={**(headers or {}), **claim})
            with urllib.request.urlopen(req, timeout=policy.timeout) as resp:
                resp.read()
                return Result(True, resp.status, attempt)
        except urllib.error.HTTPError as e:  # an answer, not 2xx
            status = e.code
            e.read()
            if status not in RETRYABLE and not (policy.retry_any_error and status >= 400):
                return Result(False, status, attempt, "non-retryable")
            retry_after = e.headers.get("Retry-After")
        except (urllib.error.URLError, http.client.HTTPException, OSError):
            status = 0  # no answer: reset, refused, timed out; retried
        if attempt == policy.max_attempts:
            break
        wait = retry_after_seconds(retry_after) if policy.honour_retry_after else None
        if wait is not None:
            wait += rng.uniform(0, policy.retry_after_jitter)
        else:
            wait = backoff(policy, attempt, rng)
        if time.monotonic() + wait > deadline:
            return Result(False, status, attempt, "budget")
        if claim_waits:
            claim = {"X-Retrylab-Wait": f"{wait * 1000:.3f}"}
        time.sleep(wait)
    return Result(False, status, policy.max_attempts, "gave-up")


def parse_clients(value):
    """The client ids of RETRYLAB_CLIENTS: "0-3,8,12" is [0, 1, 2, 3, 8, 12]."""
    ids = []
    for item in value.split(","):
        lo, _, hi = item.partition("-")
        ids.extend(range(int(lo), int(hi or lo) + 1))
    return ids


def clients_from_env(env):
    """The clients this process plays: (id, base URL, API key or "") each.
    RETRYLAB_CLIENTS set: several (docs/exec.md, "Many clients per
    process"); else the one of RETRYLAB_BASE_URL and RETRYLAB_CLIENT."""
    if "RETRYLAB_CLIENTS" in env:
        ids = parse_clients(env["RETRYLAB_CLIENTS"])
        keys = env["RETRYLAB_API_KEYS"].split(",") if env.get("RETRYLAB_API_KEYS") else [""] * len(ids)
        prefix = env["RETRYLAB_BASE_URL_PREFIX"]  # http://HOST:PORT/c/
        return [(k, f"{prefix}{k}", key) for k, key in zip(ids, keys)]
    return [(int(env.get("RETRYLAB_CLIENT", "0")), env["RETRYLAB_BASE_URL"], env.get("RETRYLAB_API_KEY", ""))]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mistake", choices=sorted(MISTAKES), help="run the loop with this mistake")
    args = ap.parse_args(argv)
    policy = MISTAKES[args.mistake] if args.mistake else Policy()
    n = int(os.environ.get("RETRYLAB_REQUESTS", "1"))
    clients = clients_from_env(os.environ)
    out = threading.Lock()  # one line at a time, each printed as soon as its request ends

    def play(client, base, key):
        headers = {"Authorization": "Bearer " + key} if key else {}
        for i in range(n):
            r = get_with_retries(f"{base}/r/{i}", policy, headers, claim_waits=True)
            path = f"/c/{client}/r/{i}"  # names its client: required when a process plays several
            line = f"ok {path}" if r.ok else f"fail {path} {r.reason} (status {r.status}, {r.attempts} attempts)"
            with out:
                print(line, flush=True)

    print("ready", flush=True)  # the start barrier: the phases start when every client is ready
    threads = [threading.Thread(target=play, args=c) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return 0


if __name__ == "__main__":
    sys.exit(main())
