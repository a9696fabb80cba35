#!/usr/bin/env python3
"""One retrylab exec client with a known backoff policy (stdlib only).

It requests $RETRYLAB_BASE_URL/r/0 .. r/N-1 and prints one result line
each (docs/exec.md). On a 429 or 5xx it retries, at most 8 attempts,
after a wait its --policy draws; it ignores Retry-After, so the wait is
the policy's alone:

  full      full jitter: U[0, min(4, 0.5 * 2**n)) seconds
  lockstep  1 s, every time
  bimodal   0.5 s or 1.5 s, at random
  clock     until the next whole second of the wall clock
"""

import argparse
import os
import random
import sys
import time
import urllib.error
import urllib.request


def wait(policy, n):
    if policy == "full":
        return random.uniform(0, min(4.0, 0.5 * 2**n))
    if policy == "lockstep":
        return 1.0
    if policy == "bimodal":
        return random.choice((0.5, 1.5))
    if policy == "clock":
        now = time.time()
        return (int(now) + 1) - now
    raise SystemExit("unknown policy " + policy)


def call(url, policy):
    for n in range(8):
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:
                resp.read()
                return None
        except urllib.error.HTTPError as e:
            e.read()
            if e.code != 429 and e.code < 500:
                return "status %d" % e.code
            last = "status %d" % e.code
        except OSError as e:
            last = str(e).replace("\n", " ")
        if n < 7:
            time.sleep(wait(policy, n))
    return last


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--policy", required=True)
    policy = ap.parse_args().policy
    base = os.environ["RETRYLAB_BASE_URL"].rstrip("/")
    print("ready", flush=True)
    for i in range(int(os.environ.get("RETRYLAB_REQUESTS", "1"))):
        err = call("%s/r/%d" % (base, i), policy)
        print(("ok /r/%d" % i) if err is None else ("fail /r/%d %s" % (i, err)), flush=True)


if __name__ == "__main__":
    sys.exit(main())
