package runner

import (
	"context"
	"fmt"
	"github.com/retrylab/retrylab/scenarios"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/retrylab/retrylab/stubserver"
	"github.com/retrylab/retrylab/timeline"
)

// BenchmarkShardedFleet compares, in the same run, the aggregate
// throughput of one fleet split into n shards driving one external stub
// (RunOptions.Target; the shards run at once, in this process) with one
// process's fleet of the same total clients against the same stub. Each
// run writes its timeline to a file; the stub records nothing. Metrics:
// attempts/s of the whole fleet and of the shards together, and their
// ratio (sharded / whole).
//
//	go test -run '^$' -bench BenchmarkShardedFleet -benchtime 3x ./runner
func BenchmarkShardedFleet(b *testing.B) {
	const clients, requests = 1000, 30
	srv, err := stubserver.New(stubserver.Config{}, stubserver.Options{})
	if err != nil {
		b.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go srv.Serve(l)
	defer srv.Shutdown(context.Background())
	target := "http://" + l.Addr().String()
	sc := &scenarios.Scenario{Name: "bench", Duration: time.Minute, Fleet: scenarios.Fleet{
		Clients: clients, Requests: requests, Method: "GET", Timeout: 30 * time.Second}}
	dir := b.TempDir()

	// fleet runs the fleet as n shards at once and returns the attempts
	// and the wall time from the first start to the last end.
	fleet := func(n int) (int64, time.Duration) {
		var wg sync.WaitGroup
		sums := make([]*Summary, n)
		errs := make([]error, n)
		start := time.Now()
		for i := range n {
			wg.Go(func() {
				f, err := os.Create(filepath.Join(dir, fmt.Sprintf("shard-%d-of-%d.ndjson", i, n)))
				if err != nil {
					errs[i] = err
					return
				}
				defer f.Close()
				sh := timeline.Shard{}
				if n > 1 {
					sh = timeline.Shard{Index: i, Count: n}
				}
				sums[i], errs[i] = Run(context.Background(), sc, RunOptions{Subject: passthrough{}, Target: target, Shard: sh,
					Timeline: f, MaxConns: fdBudget / n})
			})
		}
		wg.Wait()
		el := time.Since(start)
		var attempts int64
		for i := range n {
			if errs[i] != nil {
				b.Fatal(errs[i])
			}
			if sums[i].Results["ok"] != sums[i].Planned {
				b.Fatalf("shard %d/%d: %v of %d", i, n, sums[i].Results, sums[i].Planned)
			}
			attempts += sums[i].Attempts
		}
		return attempts, el
	}
	for _, n := range []int{2, 4} {
		b.Run(fmt.Sprintf("shards=%d", n), func(b *testing.B) {
			var wholeN, shardN int64
			var wholeD, shardD time.Duration
			wholeFirst := false
			for b.Loop() {
				// Alternate which goes first, so warm-up and the machine's
				// drifting load do not favour one side.
				wholeFirst = !wholeFirst
				if wholeFirst {
					a, d := fleet(1)
					wholeN, wholeD = wholeN+a, wholeD+d
				}
				a, d := fleet(n)
				shardN, shardD = shardN+a, shardD+d
				if !wholeFirst {
					a, d := fleet(1)
					wholeN, wholeD = wholeN+a, wholeD+d
				}
			}
			whole := float64(wholeN) / wholeD.Seconds()
			sharded := float64(shardN) / shardD.Seconds()
			b.ReportMetric(whole, "whole-attempts/s")
			b.ReportMetric(sharded, "sharded-attempts/s")
			b.ReportMetric(sharded/whole, "ratio")
			b.ReportMetric(0, "ns/op")
		})
	}
}
