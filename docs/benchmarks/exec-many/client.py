#!/usr/bin/env python3
"""A retrylab exec subject in Python (stdlib only): full-jitter retries.

One client per process (RETRYLAB_BASE_URL, RETRYLAB_CLIENT) or, with
fleet.processes, several (RETRYLAB_CLIENTS, RETRYLAB_BASE_URL_PREFIX), one
thread each. See docs/exec.md for the protocol.
"""
import os
import random
import sys
import threading
import time
import urllib.error
import urllib.request

BASE, CAP, ATTEMPTS = 0.1, 2.0, 10  # seconds, seconds, attempts per request
RETRY = {429, 500, 502, 503, 504}


def clients_from(spec):
    """Parse RETRYLAB_CLIENTS: "0-3,8,12"."""
    ids = []
    for item in spec.split(","):
        lo, _, hi = item.partition("-")
        ids.extend(range(int(lo), int(hi or lo) + 1))
    return ids


def call(url, key):
    """One logical request: (ok, reason)."""
    headers = {"Authorization": "Bearer " + key} if key else {}
    for attempt in range(ATTEMPTS):
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=5) as resp:
                resp.read()
                return True, ""
        except urllib.error.HTTPError as e:
            e.read()
            if e.code not in RETRY:
                return False, "non-retryable %d" % e.code
            reason = "gave-up after %d attempts (status %d)" % (attempt + 1, e.code)
        except OSError as e:
            reason = "gave-up after %d attempts (%s)" % (attempt + 1, e)
        if attempt + 1 < ATTEMPTS:
            time.sleep(random.uniform(0, min(CAP, BASE * 2 ** attempt)))
    return False, reason


def main():
    n = int(os.environ["RETRYLAB_REQUESTS"])
    if "RETRYLAB_CLIENTS" in os.environ:
        ids = clients_from(os.environ["RETRYLAB_CLIENTS"])
        prefix = os.environ["RETRYLAB_BASE_URL_PREFIX"]
        keys = os.environ.get("RETRYLAB_API_KEYS", "").split(",")
        plays = [(prefix + str(k), keys[i] if i < len(keys) else "") for i, k in enumerate(ids)]
    else:
        plays = [(os.environ["RETRYLAB_BASE_URL"], os.environ.get("RETRYLAB_API_KEY", ""))]
    lock = threading.Lock()

    def play(base, key):
        for i in range(n):
            url = "%s/r/%d" % (base, i)  # names the client: right in both modes
            ok, reason = call(url, key)
            with lock:
                print(("ok " + url) if ok else ("fail %s %s" % (url, reason)), flush=True)

    print("ready", flush=True)
    threads = [threading.Thread(target=play, args=p) for p in plays]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


if __name__ == "__main__":
    sys.exit(main())
