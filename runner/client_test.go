package runner

import (
	"bytes"
	"context"
	"net/http"
	"path"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrylab/retrylab/subjects"
	"github.com/retrylab/retrylab/timeline"
)

// slowSubject's call of a logical request whose seq is a key of slow
// first sleeps that long, ignoring its context (a library that does not
// heed cancellation); every call then goes to the harness transport.
type slowSubject struct{ slow map[int]time.Duration }

func (slowSubject) Name() string { return "slow" }
func (s slowSubject) New(next http.RoundTripper, _ subjects.Params) subjects.Caller {
	return func(_ context.Context, req *http.Request) (*http.Response, error) {
		seq, _ := strconv.Atoi(path.Base(req.URL.Path)) // /c/ID/r/SEQ
		if d, ok := s.slow[seq]; ok {
			time.Sleep(d)
		}
		return next.RoundTrip(req)
	}
}

// A call that outlives the fleet's timeout is recorded hung at the
// timeout, and the client goes on with its next requests at once: the
// run ends when they are done, not when the stuck call returns.
func TestClientHungGoesOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc := mustParse(t, `
duration: 1m
server: {phases: [{respond: ok}]}
fleet: {clients: 3, requests: 4, timeout: 2s}
`)
		var buf bytes.Buffer
		start := time.Now()
		sum, err := Run(context.Background(), sc, RunOptions{Virtual: true, Subject: slowSubject{slow: map[int]time.Duration{1: 5 * time.Second}}, Timeline: &buf})
		if err != nil {
			t.Fatal(err)
		}
		if el := time.Since(start); el < 2*time.Second || el > 3*time.Second {
			t.Errorf("run took %v; want about the one timeout (2s), not the stuck calls' 5s", el)
		}
		time.Sleep(4 * time.Second) // the stuck calls return, their goroutines exit
		if sum.Results["ok"] != 9 || sum.Results["hung"] != 3 || sum.Stopped != StoppedDone {
			t.Errorf("Summary = %+v; want 9 ok, 3 hung, stopped done", sum)
		}
		_, _, outs := decodeAll(t, buf.Bytes())
		seen := map[string]bool{}
		for _, o := range outs {
			if seen[o.Key] {
				t.Errorf("%s recorded twice", o.Key)
			}
			seen[o.Key] = true
			hung := path.Base(o.Key) == "1"
			if hung != (o.Result == timeline.ResultHung) || (hung && o.Duration() != 2*time.Second) {
				t.Errorf("outcome %+v; want seq 1 hung after exactly 2s, the rest ok", o)
			}
		}
		if len(seen) != 12 {
			t.Errorf("%d requests recorded; want 12", len(seen))
		}
	})
}

// A call that returns at the instant its watchdog fires is recorded
// once, ok or hung, whichever of the two ran first, and the client makes
// every request after it.
func TestClientReturnsAtTheTimeout(t *testing.T) {
	for range 20 {
		synctest.Test(t, func(t *testing.T) {
			sc := mustParse(t, `
duration: 1m
server: {phases: [{respond: ok}]}
fleet: {clients: 4, requests: 3, timeout: 2s}
`)
			var buf bytes.Buffer
			sum, err := Run(context.Background(), sc, RunOptions{Virtual: true, Subject: slowSubject{slow: map[int]time.Duration{0: 2 * time.Second}}, Timeline: &buf})
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Second) // a call the watchdog took returns
			if sum.Results["ok"]+sum.Results["hung"] != 12 || sum.Results["ok"] < 8 {
				t.Errorf("Summary = %+v; want 12 ok or hung, at least the 8 after the first ok", sum)
			}
			_, _, outs := decodeAll(t, buf.Bytes())
			seen := map[string]bool{}
			for _, o := range outs {
				if seen[o.Key] {
					t.Errorf("%s recorded twice", o.Key)
				}
				seen[o.Key] = true
			}
			if len(seen) != 12 {
				t.Errorf("%d requests recorded; want 12", len(seen))
			}
		})
	}
}
