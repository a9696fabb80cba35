package retrylabtest_test

import (
	"testing"

	"github.com/retrylab/retrylab/retrylabtest"
)

// The go test gate of docs/ci.md, verbatim (TestCIRecipes checks it).
func TestRetriesSurviveAnOutage(t *testing.T) {
	for _, sc := range []string{"outage-date", "non-retryable", "malformed-retry-after"} {
		t.Run(sc, func(t *testing.T) {
			res := retrylabtest.Run(t, retrylabtest.Builtin(sc), retrylabtest.Registered("retrylab"), retrylabtest.WithClients(20), retrylabtest.WithRequests(3))
			res.AssertPass(t)
		})
	}
}
