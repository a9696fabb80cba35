package runner

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/retrylab/retrylab/subjects"
	"github.com/retrylab/retrylab/timeline"
)

// downShared: a server that stays down, and one process whose clients
// share one retrylab client, so their retries share one retry budget.
const downShared = `
name: down-shared
duration: 60s
server:
  phases:
    - {name: down, respond: {status: 503}, retry_after: {form: none}}
fleet: {clients: 10, processes: 1, requests: 20, think: 10ms, timeout: 10s}
subject: {name: retrylab, policy: {base: 1ms, cap: 2ms, max_attempts: 3, budget: 5s}}
`

// TestSummaryShed: the summary counts the gave-up outcomes the subject's
// retry budget ended (Shed), apart from those that ran out of attempts:
// against a server that stays down, the shared budget's 500 tokens pay
// for 100 retries, so about 50 calls make their 3 attempts and the rest
// are shed; a subject without a retry budget sheds none.
func TestSummaryShed(t *testing.T) {
	for _, tt := range []struct {
		subject string
		shed    bool
	}{{"retrylab", true}, {"no-retry-budget", false}} {
		synctest.Test(t, func(t *testing.T) {
			sc := mustParse(t, strings.Replace(downShared, "name: retrylab", "name: "+tt.subject, 1))
			s, err := subjects.Lookup(tt.subject)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			sum, err := Run(context.Background(), sc, RunOptions{Virtual: true, Seed: 3, Timeline: &buf, Subject: s})
			if err != nil {
				t.Fatal(err)
			}
			gaveUp := sum.Results[timeline.ResultGaveUp]
			if gaveUp != 200 {
				t.Fatalf("%s: results %v; want 200 gave-up", tt.subject, sum.Results)
			}
			shedLines := int64(0)
			for _, o := range decode(t, buf.Bytes()).outs {
				if strings.Contains(o.Error, "retry budget") {
					shedLines++
				}
			}
			if sum.Shed != shedLines {
				t.Errorf("%s: Shed = %d; want the %d outcomes whose error names the retry budget", tt.subject, sum.Shed, shedLines)
			}
			if tt.shed && (sum.Shed < 100 || sum.Shed >= gaveUp) {
				t.Errorf("%s: Shed = %d of %d gave-up; want most, not all (the first calls ran out of attempts)", tt.subject, sum.Shed, gaveUp)
			}
			if !tt.shed && sum.Shed != 0 {
				t.Errorf("%s: Shed = %d; want none without a retry budget", tt.subject, sum.Shed)
			}
		})
	}
}
