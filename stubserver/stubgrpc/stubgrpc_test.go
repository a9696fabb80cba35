package stubgrpc

import (
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/retrylab/retrylab/internal/memnet"
	"github.com/retrylab/retrylab/stubserver"
	"github.com/retrylab/retrylab/timeline"
)

// stub runs a gRPC stub for cfg in the bubble and returns a client
// connection to it and the attempts it recorded so far.
func stub(t *testing.T, cfg stubserver.Config) (*grpc.ClientConn, func() []timeline.Attempt) {
	t.Helper()
	cfg.Protocol = stubserver.ProtocolGRPC
	var mu sync.Mutex
	var got []timeline.Attempt
	nw := memnet.New()
	s, err := stubserver.New(cfg, stubserver.Options{Virtual: true, NewFrontEnd: New, OnAttempt: func(a *timeline.Attempt) {
		mu.Lock()
		got = append(got, *a)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	l := nw.Listen()
	go s.Serve(l)
	cc, err := grpc.NewClient("passthrough:///"+l.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return nw.DialContext(ctx, "tcp", addr) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cc.Close()
		s.Close(context.Background())
		nw.Close()
	})
	return cc, func() []timeline.Attempt {
		mu.Lock()
		defer mu.Unlock()
		return append([]timeline.Attempt(nil), got...)
	}
}

func call(cc *grpc.ClientConn, path string, trailer *metadata.MD, md ...string) error {
	ctx := metadata.AppendToOutgoingContext(context.Background(), append([]string{stubserver.MetaPath, path}, md...)...)
	opts := []grpc.CallOption{}
	if trailer != nil {
		opts = append(opts, grpc.Trailer(trailer))
	}
	return cc.Invoke(ctx, "/retrylab.v1.Stub/Call", &emptypb.Empty{}, &emptypb.Empty{}, opts...)
}

// Each form of the wait reaches the client as gRPC sends it and is
// recorded with the code, the mapped status and the not_before it allows.
func TestWaits(t *testing.T) {
	for _, tc := range []struct {
		form         string
		pushback     string // trailer the client gets
		retryInfo    time.Duration
		recordedInfo string
		notBefore    bool
	}{
		{form: stubserver.FormNone},
		{form: stubserver.FormPushback, pushback: "1500", notBefore: true},
		{form: stubserver.FormPushbackNegative, pushback: "-1500"},
		{form: stubserver.FormPushbackGarbage, pushback: "soon, maybe"},
		{form: stubserver.FormRetryInfo, retryInfo: 1500 * time.Millisecond, recordedInfo: "1.500s", notBefore: true},
	} {
		t.Run(tc.form, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cc, attempts := stub(t, stubserver.Config{Phases: []stubserver.Phase{{
					Name: "outage", Respond: stubserver.Respond{Kind: stubserver.RespondStatus, Status: 503},
					RetryAfter: stubserver.RetryAfter{Form: tc.form, Fixed: 1500 * time.Millisecond},
				}}})
				var tr metadata.MD
				err := call(cc, "/c/7/r/0", &tr, "grpc-previous-rpc-attempts", "2")
				st := status.Convert(err)
				if st.Code() != codes.Unavailable {
					t.Fatalf("code = %v; want UNAVAILABLE", st.Code())
				}
				if got := tr.Get("grpc-retry-pushback-ms"); (tc.pushback == "") != (len(got) == 0) || len(got) > 0 && got[0] != tc.pushback {
					t.Errorf("pushback trailer = %q; want %q", got, tc.pushback)
				}
				var info time.Duration
				for _, d := range st.Details() {
					if ri, ok := d.(*errdetails.RetryInfo); ok {
						info = ri.GetRetryDelay().AsDuration()
					}
				}
				if info != tc.retryInfo {
					t.Errorf("RetryInfo delay = %v; want %v", info, tc.retryInfo)
				}
				a := attempts()
				if len(a) != 1 {
					t.Fatalf("recorded %d attempts; want 1", len(a))
				}
				got := a[0]
				if got.Client != "7" || got.Key != "7/0" || got.Status != 503 || got.GRPCCode != "UNAVAILABLE" || got.Method != stubserver.MethodGRPC ||
					got.Pushback != tc.pushback || got.RetryInfo != tc.recordedInfo || got.PreviousAttempts != 2 || got.HasNotBefore != tc.notBefore {
					t.Errorf("recorded %+v", got)
				}
				if tc.notBefore && got.NotBefore != got.Done+int64(1500*time.Millisecond) && got.NotBefore != got.At+int64(1500*time.Millisecond) {
					t.Errorf("not_before = %d; want 1.5s after the answer (%d)", got.NotBefore, got.Done)
				}
			})
		})
	}
}

// Every status of the mapping reaches the client as its code.
func TestMapping(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mix []stubserver.Weighted
		for _, m := range stubserver.GRPCMapping {
			mix = append(mix, stubserver.Weighted{Status: m.Status, Weight: 1})
		}
		cc, attempts := stub(t, stubserver.Config{Phases: []stubserver.Phase{{
			Name: "mix", Respond: stubserver.Respond{Kind: stubserver.RespondMix, Mix: mix},
		}}})
		for i := range 200 {
			err := call(cc, stubserver.RequestPath(1, i), nil)
			a := attempts()
			last := a[len(a)-1]
			want := stubserver.GRPCCode(last.Status)
			if got := status.Code(err); int(got) != want || last.GRPCCode != stubserver.CodeNames[want] {
				t.Fatalf("status %d answered %v, recorded %s; want %s", last.Status, got, last.GRPCCode, stubserver.CodeNames[want])
			}
		}
	})
}

// A reset breaks the call's connection: the client sees UNAVAILABLE and
// the stub records the fault.
func TestReset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cc, attempts := stub(t, stubserver.Config{Phases: []stubserver.Phase{{
			Name: "reset", Respond: stubserver.Respond{Kind: stubserver.RespondFault, Fault: stubserver.FaultReset},
		}}})
		err := call(cc, "/c/1/r/0", nil)
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("err = %v; want UNAVAILABLE", err)
		}
		if a := attempts(); len(a) != 1 || a[0].Fault != timeline.FaultReset {
			t.Fatalf("recorded %+v; want one reset", a)
		}
	})
}

// Without x-retrylab-path the stub identifies a call by x-client-id and
// x-retrylab-request, as it identifies an HTTP request.
func TestIdentityFromMetadata(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cc, attempts := stub(t, stubserver.Config{})
		ctx := metadata.AppendToOutgoingContext(context.Background(), "x-client-id", "svc-a", "x-retrylab-request", "r1")
		for range 2 {
			if err := cc.Invoke(ctx, "/retrylab.v1.Stub/Call", &emptypb.Empty{}, &emptypb.Empty{}); err != nil {
				t.Fatal(err)
			}
		}
		a := attempts()
		if len(a) != 2 || a[1].Client != "svc-a" || a[1].Key != "svc-a req:r1" || a[1].Attempt != 2 || a[1].Path != "/retrylab.v1.Stub/Call" || a[1].GRPCCode != "OK" {
			t.Fatalf("recorded %+v", a)
		}
	})
}

// docs/grpc.md prints the stub's mapping: a row per GRPCMapping entry,
// and no other status row.
func TestMappingDoc(t *testing.T) {
	b, err := os.ReadFile("../../docs/grpc.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	rows := 0
	for _, line := range strings.Split(doc, "\n") {
		if len(line) > 6 && line[0] == '|' && line[2] >= '1' && line[2] <= '5' && line[5] == ' ' {
			rows++
		}
	}
	for _, m := range stubserver.GRPCMapping {
		row := fmt.Sprintf("| %d | `%s` (%d) |", m.Status, stubserver.CodeNames[m.Code], m.Code)
		if !strings.Contains(doc, row) {
			t.Errorf("docs/grpc.md lacks the row %q", row)
		}
	}
	if rows != len(stubserver.GRPCMapping) {
		t.Errorf("docs/grpc.md has %d status rows; GRPCMapping %d", rows, len(stubserver.GRPCMapping))
	}
}

// Behind a proxy (Config.ProxyTimeout), a call the stub has not answered
// within the timeout gets the proxy's UNAVAILABLE at that instant, and
// the stub keeps its work: the call is served when its turn comes and
// recorded abandoned with its service (wasted). A call answered in time
// passes through.
func TestProxyTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cc, attempts := stub(t, stubserver.Config{ProxyTimeout: 100 * time.Millisecond,
			Capacity: &stubserver.Capacity{Concurrency: 1, Queue: 10, Service: 60 * time.Millisecond}})
		start := time.Now()
		if err := call(cc, "/c/0/r/0", nil); err != nil {
			t.Fatalf("call served in 60ms behind a 100ms proxy: %v; want OK", err)
		}
		// Two calls at once: the first is served by 60ms, the second
		// waits for the worker and would be served by 120ms.
		errs := make(chan error, 2)
		start = time.Now()
		for i := range 2 {
			go func() { errs <- call(cc, fmt.Sprintf("/c/%d/r/0", i+1), nil) }()
			synctest.Wait()
		}
		var unavailable int
		for range 2 {
			err := <-errs
			if status.Code(err) == codes.Unavailable {
				unavailable++
				if d := time.Since(start); d != 100*time.Millisecond {
					t.Errorf("the proxy's UNAVAILABLE came after %v; want at its timeout, 100ms", d)
				}
				if !strings.Contains(status.Convert(err).Message(), "proxy timeout") {
					t.Errorf("message %q; want it to name the proxy timeout", status.Convert(err).Message())
				}
			} else if err != nil {
				t.Errorf("call: %v; want OK or UNAVAILABLE", err)
			}
		}
		if unavailable != 1 {
			t.Fatalf("%d calls got UNAVAILABLE; want the one that waited", unavailable)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		got := attempts()
		if len(got) != 3 {
			t.Fatalf("%d attempts recorded; want 3", len(got))
		}
		late := got[2]
		if late.Fault != timeline.FaultAbandoned || late.Service != int64(60*time.Millisecond) || late.Queue != int64(60*time.Millisecond) {
			t.Errorf("the timed-out call was recorded %+v; want abandoned, served 60ms after 60ms queued (its work kept)", late)
		}
	})
}

// A 429's rate-limit headers reach the client as trailing metadata, under
// their lowercase names, with the pushback, in either header family.
func TestRateLimitTrailer(t *testing.T) {
	for _, tc := range []struct {
		headers string
		want    []string // trailer keys
	}{
		{stubserver.HeadersIETF, []string{"ratelimit"}},
		{stubserver.HeadersXRateLimit, []string{"x-ratelimit-remaining", "x-ratelimit-reset"}},
		{stubserver.HeadersNone, nil},
	} {
		t.Run(tc.headers, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cc, _ := stub(t, stubserver.Config{Headers: tc.headers, Phases: []stubserver.Phase{{
					Name: "quota", Respond: stubserver.Respond{Kind: stubserver.RespondStatus, Status: 429},
					RetryAfter: stubserver.RetryAfter{Form: stubserver.FormPushback, Fixed: 2 * time.Second},
				}}})
				for i := range 3 { // the second and third on a reused call
					var tr metadata.MD
					if err := call(cc, stubserver.RequestPath(1, i), &tr); status.Code(err) != codes.ResourceExhausted {
						t.Fatalf("err = %v; want RESOURCE_EXHAUSTED", err)
					}
					want := map[string]bool{"grpc-retry-pushback-ms": true}
					for _, k := range tc.want {
						want[k] = true
					}
					got := map[string]bool{}
					for k := range tr {
						if k != "content-type" { // gRPC's own, in a trailers-only answer
							got[k] = true
						}
					}
					if !maps.Equal(got, want) {
						t.Errorf("call %d: trailer keys %v; want %v", i, slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
					}
					if got := tr.Get("grpc-retry-pushback-ms"); len(got) != 1 || got[0] != "2000" {
						t.Errorf("call %d: pushback = %q; want [2000]", i, got)
					}
				}
			})
		})
	}
}

// Each call is decided by its own metadata and message only: one call's
// x-client-id, Idempotency-Key or body does not reach the next (the front
// end reuses a call's objects), and a message is the body the key digests.
func TestCallsAreTheirOwn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cc, attempts := stub(t, stubserver.Config{Phases: []stubserver.Phase{{
			Name: "outage", Respond: stubserver.Respond{Kind: stubserver.RespondStatus, Status: 503},
		}}})
		small, large, huge := wrapperspb.String("order 1"), wrapperspb.String(strings.Repeat("x", 3000)), wrapperspb.String(strings.Repeat("y", 9000))
		for i, c := range []struct {
			msg *wrapperspb.StringValue
			md  []string
		}{
			{small, []string{"x-client-id", "svc-a", "idempotency-key", "k1"}},
			{large, nil},
			{small, nil},
			{huge, []string{"x-client-id", "svc-b", "x-client-id", "svc-c"}},
			{large, nil},
		} {
			ctx := metadata.AppendToOutgoingContext(context.Background(), append([]string{stubserver.MetaPath, "/orders"}, c.md...)...)
			if err := cc.Invoke(ctx, "/shop.v1.Orders/Create", c.msg, &emptypb.Empty{}); status.Code(err) != codes.Unavailable {
				t.Fatalf("call %d: err = %v; want UNAVAILABLE", i, err)
			}
		}
		a := attempts()
		if len(a) != 5 {
			t.Fatalf("recorded %d attempts; want 5", len(a))
		}
		digest := func(key string) string {
			_, d, ok := strings.Cut(key, " body:")
			if !ok {
				t.Fatalf("key %q has no body digest", key)
			}
			return d
		}
		switch anon := a[1].Client; {
		case a[0].Client != "svc-a" || a[0].IdemKey == "":
			t.Errorf("call 0 recorded %+v; want client svc-a with its idempotency key", a[0])
		case anon == "svc-a" || a[1].IdemKey != "" || a[2].Client != anon || a[2].IdemKey != "" || a[4].Client != anon:
			t.Errorf("calls without x-client-id or idempotency-key recorded %+v", a)
		case a[3].Client != "svc-b":
			t.Errorf("call 3 recorded client %q; want svc-b (the first value)", a[3].Client)
		case a[0].Path != "/orders" || a[0].Method != stubserver.MethodGRPC:
			t.Errorf("call 0 recorded %s %s; want %s /orders", a[0].Method, a[0].Path, stubserver.MethodGRPC)
		}
		d := []string{digest(a[0].Key), digest(a[1].Key), digest(a[2].Key), digest(a[3].Key), digest(a[4].Key)}
		if d[0] != d[2] || d[1] != d[4] || d[0] == d[1] || d[3] == d[1] || d[3] == d[0] {
			t.Errorf("body digests %q: want equal for equal messages (0, 2 and 1, 4), else different", d)
		}
	})
}
