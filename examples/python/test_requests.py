"""requests with urllib3's Retry, against `retrylab serve`. Skipped when
requests is not installed (Debian: python3-requests)."""

import pytest

requests = pytest.importorskip("requests", reason="requests is not installed (pip install requests, or apt-get install python3-requests)")
from requests.adapters import HTTPAdapter  # noqa: E402
from urllib3.util.retry import Retry  # noqa: E402

STATUSES = (429, 500, 502, 503, 504)


def session(retry):
    s = requests.Session()
    s.mount("http://", HTTPAdapter(max_retries=retry))
    return s


# The policy to copy: urllib3 honours Retry-After (both forms) on 413, 429
# and 503, backs off exponentially otherwise, and raise_on_status=False
# hands back the last answer instead of raising once the retries are spent.
GOOD = Retry(total=4, backoff_factor=0.5, status_forcelist=STATUSES, respect_retry_after_header=True, raise_on_status=False)

# The common mistake: a Retry without backoff_factor (its default is 0)
# retries at once whenever no Retry-After paces it.
NO_BACKOFF = Retry(total=4, status_forcelist=STATUSES, raise_on_status=False)


def requests_of(n, retry):
    def client(url):
        with session(retry) as s:
            return [s.get(f"{url}/r/{i}", timeout=10).status_code for i in range(n)]

    return client


@pytest.mark.scenario("outage")
def test_requests_retry_waits_as_retry_after_says(retrylab):
    statuses = retrylab.fleet(4, requests_of(2, GOOD))
    assert statuses == [[200, 200]] * 4
    retrylab.assert_verdict("pass")


@pytest.mark.scenario("bare")
def test_requests_retry_without_backoff_factor_fails_instant_retry(retrylab):
    retrylab.fleet(4, requests_of(1, NO_BACKOFF))
    retrylab.assert_verdict("fail", "instant-retry")
