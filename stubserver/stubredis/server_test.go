package stubredis

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrylab/retrylab/internal/redistest"
	"github.com/retrylab/retrylab/stubserver"
	"github.com/retrylab/retrylab/timeline"
)

// layered is a quota of three layers with tiers, answered with IETF
// headers and Retry-After from the limiter.
func layeredConfig(onError string) stubserver.Config {
	return stubserver.Config{
		Headers: stubserver.HeadersIETF,
		Quota: &stubserver.Quota{
			Tiers: []stubserver.Tier{
				{Name: "free", Default: true, Anonymous: true, Limits: []stubserver.Limit{
					{Name: "burst", Algorithm: tb, Limit: 1, Per: time.Hour, Burst: 5},
					{Name: "minute", Algorithm: swl, Limit: 3, Per: time.Minute},
					{Name: "client", Algorithm: fw, Limit: 100, Per: time.Hour, Key: stubserver.KeyClient},
				}},
				{Name: "pro", Keys: []string{"pro-*"}, Limits: []stubserver.Limit{
					{Name: "burst", Algorithm: tb, Limit: 1, Per: time.Hour, Burst: 5},
				}},
			},
			OnError: onError,
		},
		Phases: []stubserver.Phase{{Name: "q", Respond: stubserver.Respond{Kind: stubserver.RespondQuota},
			RetryAfter: stubserver.RetryAfter{Form: stubserver.FormDelta, Value: stubserver.ValueLimiter}}},
	}
}

// logLines counts the records a slog handler is given.
type logLines struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logLines) Enabled(context.Context, slog.Level) bool { return true }
func (l *logLines) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, r.Message)
	return nil
}
func (l *logLines) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logLines) WithGroup(string) slog.Handler      { return l }

func (l *logLines) count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.msgs {
		if m == msg {
			n++
		}
	}
	return n
}

// TestServerWithRedis: two stubs on one Redis answer one layered quota
// (its tiers apart, the rejecting limit named, Retry-After from it); with
// Redis stopped, a quota that fails closed answers 503 with Retry-After 1
// and one that fails open answers 200, both counting BackendErrors and
// logging at most a line a second.
func TestServerWithRedis(t *testing.T) {
	for _, onError := range []string{stubserver.OnErrorClosed, stubserver.OnErrorOpen} {
		t.Run(onError, func(t *testing.T) {
			srv := redistest.Start(t)
			var stubs []*stubserver.Server
			logs := &logLines{}
			var mu sync.Mutex
			var backends []string // Attempt.Backend of every attempt, in order
			for range 2 {
				rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true, MaxRetries: -1})
				t.Cleanup(func() { rdb.Close() })
				s, err := stubserver.New(layeredConfig(onError), stubserver.Options{
					NewLimiter: New(rdb, Options{Prefix: "e2e:", Timeout: 2 * time.Second}),
					Logger:     slog.New(logs),
					OnAttempt: func(a *timeline.Attempt) {
						mu.Lock()
						backends = append(backends, a.Backend)
						mu.Unlock()
					},
				})
				if err != nil {
					t.Fatal(err)
				}
				stubs = append(stubs, s)
			}
			do := func(i int, path string, hdr ...string) *httptest.ResponseRecorder {
				t.Helper()
				r := httptest.NewRequest("GET", path, nil)
				for j := 0; j+1 < len(hdr); j += 2 {
					r.Header.Set(hdr[j], hdr[j+1])
				}
				w := httptest.NewRecorder()
				stubs[i%2].ServeHTTP(w, r)
				return w
			}
			for i := range 3 {
				if w := do(i, "/c/1/r/1"); w.Code != 200 {
					t.Fatalf("request %d: %d; want 200 (3 a minute)", i, w.Code)
				}
			}
			w := do(3, "/c/2/r/1")
			if w.Code != 429 || !strings.HasPrefix(w.Header().Get("RateLimit"), `"minute";r=0;t=`) {
				t.Errorf("4th request, on the other stub: %d RateLimit %q; want 429 from \"minute\"", w.Code, w.Header().Get("RateLimit"))
			}
			if ra := w.Header().Get("Retry-After"); ra == "" || ra == "0" || len(ra) > 2 {
				t.Errorf("4th request: Retry-After %q; want the minute log's wait, 1-60 s", ra)
			}
			if w := do(4, "/c/2/r/2", "X-Api-Key", "pro-7"); w.Code != 200 || w.Header().Get("RateLimit") != `"burst";r=4;t=3600` {
				t.Errorf("pro tier: %d RateLimit %q; want 200, its own bucket (4 left, full again in 1 h)", w.Code, w.Header().Get("RateLimit"))
			}

			for i := range 2 {
				if w := do(i, "/healthz"); w.Code != 200 || w.Body.String() != "ok\n" {
					t.Errorf("/healthz with Redis up: %d %q; want 200 ok", w.Code, w.Body.String())
				}
			}
			mu.Lock()
			if fmt.Sprint(backends) != "[    ]" {
				t.Errorf("backends with Redis up %q; want none marked", backends)
			}
			backends = nil
			mu.Unlock()

			srv.Stop()
			for i := range 2 {
				w := do(i, "/healthz")
				if b := w.Body.String(); w.Code != 503 || !strings.HasPrefix(b, "503 quota backend") || !strings.Contains(b, "PING") {
					t.Errorf("/healthz with Redis down: %d %q; want 503 naming the quota backend's failed PING", w.Code, b)
				}
			}
			wantCode, wantRA := 503, "1"
			if onError == stubserver.OnErrorOpen {
				wantCode, wantRA = 200, ""
			}
			start := time.Now()
			for i := range 3 {
				w := do(i, "/c/3/r/1")
				if w.Code != wantCode || w.Header().Get("Retry-After") != wantRA {
					t.Errorf("Redis down, request %d: %d Retry-After %q; want %d %q", i, w.Code, w.Header().Get("Retry-After"), wantCode, wantRA)
				}
			}
			mu.Lock()
			if want := strings.Repeat(onError+" ", 3); fmt.Sprint(backends) != "["+strings.TrimSpace(want)+"]" {
				t.Errorf("backends with Redis down %q; want each attempt marked %s (the stub's own failure)", backends, onError)
			}
			mu.Unlock()
			errs := stubs[0].Counts().BackendErrors + stubs[1].Counts().BackendErrors
			if errs != 3 {
				t.Errorf("BackendErrors = %d; want 3", errs)
			}
			took := time.Since(start)
			if n, most := logs.count("stubserver: quota backend failed"), 2*(int(took/time.Second)+1); n < 1 || n > most {
				t.Errorf("%d log lines in %v from two stubs; want at least one, at most one a second each (%d)", n, took, most)
			}
		})
	}
}

var _ http.Handler = (*stubserver.Server)(nil)
