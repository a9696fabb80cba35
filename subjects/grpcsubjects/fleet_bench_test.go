package grpcsubjects_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/retrylab/retrylab/runner"
	"github.com/retrylab/retrylab/scenarios"
	"github.com/retrylab/retrylab/stubserver"
	"github.com/retrylab/retrylab/subjects"
	"github.com/retrylab/retrylab/subjects/grpcsubjects"
)

// BenchmarkFleetGRPC compares, in the same run, the real-time fleet of
// gRPC clients (grpc-default: one attempt a call, one channel a client;
// the stub recording every attempt to a timeline file, runner, watchdog,
// outcomes) with a bare loop of grpc-go clients (a channel each) calling
// the same gRPC stub recording nothing, at the same client and request
// counts; the two alternate. Metrics: attempts/s of each and their ratio.
//
//	go test -run '^$' -bench BenchmarkFleetGRPC -benchtime 4x ./subjects/grpcsubjects
func BenchmarkFleetGRPC(b *testing.B) {
	subj, err := subjects.Lookup("grpc-default")
	if err != nil {
		b.Fatal(err)
	}
	for _, size := range []struct{ clients, requests int }{{64, 400}, {1000, 30}} {
		b.Run(fmt.Sprintf("clients=%d", size.clients), func(b *testing.B) {
			sc := &scenarios.Scenario{Name: "bench", Duration: time.Minute,
				Server: stubserver.Config{Protocol: stubserver.ProtocolGRPC},
				Fleet:  scenarios.Fleet{Clients: size.clients, Requests: size.requests, Method: "GET", Timeout: 30 * time.Second}}
			path := filepath.Join(b.TempDir(), "timeline.ndjson")
			var bareDur, fleetDur time.Duration
			var bareN, fleetN int64
			bareFirst := true
			for b.Loop() {
				bareFirst = !bareFirst
				bare := func() {
					d, err := bareGRPCLoop(size.clients, size.requests)
					if err != nil {
						b.Fatal(err)
					}
					bareDur += d
					bareN += int64(size.clients * size.requests)
				}
				if bareFirst {
					bare()
				}
				f, err := os.Create(path)
				if err != nil {
					b.Fatal(err)
				}
				sum, err := runner.Run(context.Background(), sc, runner.RunOptions{Subject: subj, Timeline: f})
				f.Close()
				if err != nil {
					b.Fatal(err)
				}
				if sum.Results["ok"] != sum.Planned {
					b.Fatalf("fleet: %v of %d", sum.Results, sum.Planned)
				}
				fleetDur += sum.Elapsed
				fleetN += sum.Attempts
				if !bareFirst {
					bare()
				}
			}
			bare := float64(bareN) / bareDur.Seconds()
			fleet := float64(fleetN) / fleetDur.Seconds()
			b.ReportMetric(bare, "bare-attempts/s")
			b.ReportMetric(fleet, "fleet-attempts/s")
			b.ReportMetric(fleet/bare, "ratio")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// bareGRPCLoop runs clients goroutines, each with a channel of its own,
// making requests calls against a gRPC stub that records nothing.
func bareGRPCLoop(clients, requests int) (time.Duration, error) {
	srv, err := stubserver.New(stubserver.Config{Protocol: stubserver.ProtocolGRPC}, stubserver.Options{})
	if err != nil {
		return 0, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	go srv.Serve(l)
	defer srv.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // one bound for the whole loop
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	fail := func(err error) {
		mu.Lock()
		firstErr = err
		mu.Unlock()
	}
	start := time.Now()
	for i := range clients {
		wg.Go(func() {
			cc, err := grpc.NewClient("passthrough:///"+l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				fail(err)
				return
			}
			defer cc.Close()
			for seq := range requests {
				cctx := metadata.AppendToOutgoingContext(ctx, stubserver.MetaPath, stubserver.RequestPath(i, seq))
				if err := cc.Invoke(cctx, grpcsubjects.Method, &emptypb.Empty{}, &emptypb.Empty{}); err != nil {
					fail(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start), firstErr
}
