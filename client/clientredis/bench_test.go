package clientredis

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/retrylab/retrylab/client"
)

// BenchmarkAddedLatency measures what pacing costs a request: the same
// RoundTrip through a Transport paced by a local x/time/rate bucket
// (Config.Rate, "local") and through Transports paced by the Redis bucket
// (Config.Limiter, a redis-server on loopback started for the benchmark):
// on a go-redis client with ContextTimeoutEnabled ("redis", the call in
// the caller's goroutine) and on one with go-redis's defaults ("handoff",
// the call in a goroutine of its own). For reference, "raw" is a bare
// EVALSHA of the same script from the first client: the round trip the
// Limiter cannot avoid. The four alternate within each iteration, so all
// see the same machine. No bucket ever waits (a rate of 1e9/s), and next
// answers 200 at once, so a difference is the pacing's cost.
//
// It reports each one's p50 and p99 in µs, the Redis bucket's ratios to
// the local one and the µs it adds, at p50 and p99.
func BenchmarkAddedLatency(b *testing.B) {
	srv := startRedis(b)
	o := Options{Rate: 1e9, Burst: 1e6, Timeout: time.Second}
	rdb := srv.client(b, heedDeadline)
	inline, err := New(rdb, o)
	if err != nil {
		b.Fatal(err)
	}
	handoff, err := New(srv.client(b), o)
	if err != nil {
		b.Fatal(err)
	}
	if !inline.inline || handoff.inline {
		b.Fatal("the limiters do not call Redis as this benchmark says")
	}
	next := rtFunc(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody}, nil
	})
	trs := []*client.Transport{
		client.New(next, client.Config{Rate: 1e9, Burst: 1e6}),
		client.New(next, client.Config{Limiter: inline}),
		client.New(next, client.Config{Limiter: handoff}),
	}
	req, err := http.NewRequest(http.MethodGet, "http://api.test/", nil)
	if err != nil {
		b.Fatal(err)
	}
	call := func(tr *client.Transport) time.Duration {
		start := time.Now()
		resp, err := tr.RoundTrip(req)
		took := time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		return took
	}
	ctx := context.Background()
	keys := []string{inline.Key("raw")}
	raw := func() time.Duration {
		start := time.Now()
		err := bucket.EvalSha(ctx, rdb, keys, inline.rateArg, inline.burstArg, "take", inline.maxWaitArg).Err()
		took := time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		return took
	}
	for _, tr := range trs {
		call(tr) // the script in the server's cache, the connections open
	}
	var took [4][]time.Duration
	for i := range took {
		took[i] = make([]time.Duration, 0, b.N)
	}
	b.ResetTimer()
	for range b.N {
		for i, tr := range trs {
			took[i] = append(took[i], call(tr))
		}
		took[3] = append(took[3], raw())
	}
	b.StopTimer()
	if inline.FellBack() || handoff.FellBack() {
		b.Fatal("a Redis bucket fell back: its figures would be the local bucket's")
	}
	var p50, p99 [4]float64
	for i, s := range took {
		slices.Sort(s)
		q := func(p float64) float64 { return float64(s[min(len(s)-1, int(p*float64(len(s))))].Nanoseconds()) / 1e3 }
		p50[i], p99[i] = q(0.50), q(0.99)
	}
	for i, name := range []string{"local", "redis", "handoff", "raw"} {
		b.ReportMetric(p50[i], name+"-p50-µs")
		b.ReportMetric(p99[i], name+"-p99-µs")
	}
	b.ReportMetric(p50[1]/p50[0], "redis/local-p50")
	b.ReportMetric(p99[1]/p99[0], "redis/local-p99")
	b.ReportMetric(p50[1]-p50[0], "redis-added-p50-µs")
	b.ReportMetric(p99[1]-p99[0], "redis-added-p99-µs")
	b.ReportMetric(p50[2]-p50[0], "handoff-added-p50-µs")
	b.ReportMetric(p99[2]-p99[0], "handoff-added-p99-µs")
}
