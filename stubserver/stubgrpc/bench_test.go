package stubgrpc

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/retrylab/retrylab/stubserver"
	"github.com/retrylab/retrylab/timeline"
)

// BenchmarkThroughput is the gRPC stub's throughput against a bare
// grpc-go server answering the same status (UNAVAILABLE, with the
// pushback trailer), over loopback TCP, in the same run: one channel,
// calls from GOMAXPROCS×8 goroutines. The stub records every attempt (to
// a Recorder writing to io.Discard, as a run does). BENCHMARKS.md has the
// ratio and the command.
func BenchmarkThroughput(b *testing.B) {
	b.Run("bare", func(b *testing.B) {
		srv := grpc.NewServer(grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
			var m emptypb.Empty
			if err := stream.RecvMsg(&m); err != nil {
				return err
			}
			grpc.SetTrailer(stream.Context(), metadata.Pairs("grpc-retry-pushback-ms", "1000"))
			return status.Error(codes.Unavailable, "503 Service Unavailable")
		}))
		benchServe(b, srv.Serve, srv.Stop)
	})
	b.Run("stub", func(b *testing.B) {
		rec := timeline.NewRecorder(timeline.NewEncoder(discard{}), 4096)
		s, err := stubserver.New(stubserver.Config{Protocol: stubserver.ProtocolGRPC, Phases: []stubserver.Phase{{
			Name: "outage", Respond: stubserver.Respond{Kind: stubserver.RespondStatus, Status: 503},
			RetryAfter: stubserver.RetryAfter{Form: stubserver.FormPushback, Fixed: time.Second},
		}}}, stubserver.Options{Recorder: rec})
		if err != nil {
			b.Fatal(err)
		}
		benchServe(b, s.Serve, func() { s.Close(context.Background()); rec.Close() })
	})
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

func benchServe(b *testing.B, serve func(net.Listener) error, stop func()) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go serve(l)
	defer stop()
	cc, err := grpc.NewClient("passthrough:///"+l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Close()
	b.SetParallelism(8)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := metadata.AppendToOutgoingContext(context.Background(), stubserver.MetaPath, "/c/1/r/1")
		for pb.Next() {
			err := cc.Invoke(ctx, "/retrylab.v1.Stub/Call", &emptypb.Empty{}, &emptypb.Empty{})
			if status.Code(err) != codes.Unavailable {
				b.Fatalf("err = %v; want UNAVAILABLE", err)
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
}
