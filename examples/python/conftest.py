"""pytest fixtures: one `retrylab serve` for the whole session, a fresh
recording for every test, the verdict read through serve's control API.

    @pytest.mark.scenario("outage")          # examples/scenarios/outage.yaml
    def test_my_client(retrylab):
        my_client.get(retrylab.client_url(0) + "/r/0")
        retrylab.assert_verdict("pass")

retrylab is found as $RETRYLAB, else on PATH. When it is missing the tests
skip, except under CI=true, where they fail: a gate that skips is no gate.
"""

import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import threading
import urllib.error
import urllib.request

import pytest

SCENARIOS = pathlib.Path(__file__).resolve().parent.parent / "scenarios"


def pytest_configure(config):
    config.addinivalue_line("markers", "scenario(name): the scenario a test's fresh recording starts with")


def _missing(why):
    if os.environ.get("CI") == "true":
        pytest.fail(why + " (CI=true: not skipped)", pytrace=False)
    pytest.skip(why)


class Serve:
    """A running `retrylab serve` and its control API (/_retrylab/)."""

    def __init__(self, base):
        self.base = base  # http://127.0.0.1:PORT

    def _call(self, method, path, body=None, content_type=None):
        req = urllib.request.Request(self.base + "/_retrylab/" + path, data=body, method=method)
        if content_type:
            req.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return json.load(resp)
        except urllib.error.HTTPError as e:
            raise AssertionError(f"{method} /_retrylab/{path}: {e.code} {e.read().decode(errors='replace')}") from None

    def reset(self, scenario):
        """Start a new recording (and the phases' clock) with a scenario: a
        file under examples/scenarios (name without .yaml), a path, or a
        built-in name such as outage-date."""
        path = pathlib.Path(scenario)
        if not path.suffix:
            path = SCENARIOS / (scenario + ".yaml")
        if path.is_file():
            return self._call("POST", "reset", path.read_bytes(), "application/yaml")
        return self._call("POST", "reset?scenario=" + scenario)

    def verdict(self):
        """The verdict on the recording so far: `retrylab analyze --json`'s JSON."""
        return self._call("GET", "verdict")

    def client_url(self, client):
        """Client `client`'s base URL; its logical requests are .../r/0, .../r/1, ..."""
        return f"{self.base}/c/{client}"

    def fleet(self, clients, call):
        """Runs call(client_url) for clients 0..clients-1 at once, one thread
        each (clients that start together are what makes waves), and returns
        their results in order."""
        results = [None] * clients
        start = threading.Barrier(clients)

        def one(i):
            start.wait()
            results[i] = call(self.client_url(i))

        threads = [threading.Thread(target=one, args=(i,)) for i in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert not any(t.is_alive() for t in threads), "a client hung past 60 s"
        return results

    def assert_verdict(self, want, *failed):
        """Asserts the verdict (pass, fail, inconclusive) and, for a FAIL, that
        the failed checks include `failed`. Returns the verdict; its text is
        in the assertion message."""
        v = self.verdict()
        skip_for_noise(v, want)
        got = sorted(c["id"] for c in v["checks"] if c["status"] == "fail")
        detail = "\n".join(f"  {c['status']:5} {c['id']}: {c.get('reason', '')}" for c in v["checks"] if c["status"] != "skip")
        detail += "".join(f"\n  inconclusive: {r}" for r in v.get("inconclusive") or [])
        assert v["verdict"] == want, f"verdict {v['verdict']}, want {want}; failed {got}\n{detail}"
        missing = [c for c in failed if c not in got]
        assert not missing, f"failed checks {got}, want {list(failed)} among them\n{detail}"
        return v


def skip_for_noise(v, want):
    """Skips the test when the host was too loaded to judge it: an
    INCONCLUSIVE verdict that names the host's noise. Noise never passes
    or fails a test; it may leave it unjudged, and says so."""
    if v["verdict"] != "inconclusive" or want == "inconclusive":
        return
    for r in v.get("inconclusive") or []:
        if "noise" in r:
            pytest.skip("host noise: " + r)


@pytest.fixture(scope="session")
def retrylab_exe():
    """The retrylab binary: $RETRYLAB, else retrylab on PATH."""
    exe = os.environ.get("RETRYLAB") or shutil.which("retrylab")
    if not exe:
        _missing("retrylab is not on PATH and $RETRYLAB is not set (go build -o bin/retrylab ./cmd/retrylab)")
    return exe


@pytest.fixture(scope="session")
def retrylab_serve(retrylab_exe):
    exe = retrylab_exe
    # Port 0: the OS picks a free port; serve prints the URL on its first line:
    #   retrylab: serving "default" on http://127.0.0.1:41234
    proc = subprocess.Popen(
        [exe, "serve", "--addr", "127.0.0.1:0", "--duration", "10m"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        first = proc.stdout.readline()
        m = re.search(r" on (http://\S+)", first)
        if not m:
            rest = proc.stdout.read() if proc.poll() is not None else ""
            pytest.fail(f"retrylab serve printed {first!r}{rest}; want its URL", pytrace=False)
        serve = Serve(m.group(1))
        try:
            serve._call("GET", "")
        except (AssertionError, OSError) as e:
            _missing(f"this retrylab serve has no control API at /_retrylab/ ({e}); build a newer one")
        yield serve
    finally:
        proc.send_signal(signal.SIGINT)  # serve shuts down gracefully on SIGINT
        try:
            proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


@pytest.fixture
def retrylab(retrylab_serve, request):
    """The session's serve, reset to the test's @pytest.mark.scenario."""
    mark = request.node.get_closest_marker("scenario")
    if mark is None:
        pytest.fail("a test using the retrylab fixture needs @pytest.mark.scenario(NAME)", pytrace=False)
    retrylab_serve.reset(mark.args[0])
    return retrylab_serve
