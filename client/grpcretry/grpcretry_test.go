package grpcretry

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

func TestPushback(t *testing.T) {
	for _, tt := range []struct {
		v    string
		want time.Duration
		ok   bool
	}{
		{"0", 0, true}, {"1500", 1500 * time.Millisecond, true},
		{"-1", 0, false}, {"soon", 0, false}, {"1.5", 0, false}, {"", 0, false}, {"99999999999999", 0, false},
	} {
		if got, ok := Pushback(tt.v); got != tt.want || ok != tt.ok {
			t.Errorf("Pushback(%q) = %v, %v; want %v, %v", tt.v, got, ok, tt.want, tt.ok)
		}
	}
}

func TestFullJitterBounds(t *testing.T) {
	top := func(w int64) int64 { return w - 1 }
	for _, tt := range []struct {
		n    int
		want time.Duration
	}{{1, 100*time.Millisecond - 1}, {2, 200*time.Millisecond - 1}, {6, time.Second - 1}, {70, time.Second - 1}} {
		if got := FullJitter(100*time.Millisecond, time.Second, tt.n, top); got != tt.want {
			t.Errorf("FullJitter(n=%d) at the top = %v; want %v", tt.n, got, tt.want)
		}
	}
	if got := FullJitter(100*time.Millisecond, time.Second, 3, func(int64) int64 { return 0 }); got != 0 {
		t.Errorf("FullJitter at the bottom = %v; want 0", got)
	}
}

func TestAttemptsFor(t *testing.T) {
	if got := AttemptsFor(200*time.Millisecond, 4*time.Second, 20*time.Second); got < 10 || got > MaxDerivedAttempts {
		t.Errorf("AttemptsFor(200ms, 4s, 20s) = %d; want enough retries for the budget (10..%d)", got, MaxDerivedAttempts)
	}
	if got := AttemptsFor(time.Second, time.Second, time.Millisecond); got != 2 {
		t.Errorf("AttemptsFor(tiny budget) = %d; want 2", got)
	}
}

// fake answers each attempt with errs[i] (nil: OK), the trailer of
// trailers[i] if any, and records when each attempt came and the
// grpc-previous-rpc-attempts it carried.
type fake struct {
	errs     []error
	trailers []metadata.MD
	at       []time.Duration
	prev     []string
	start    time.Time
}

func (f *fake) invoke(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
	i := len(f.at)
	f.at = append(f.at, time.Since(f.start))
	md, _ := metadata.FromOutgoingContext(ctx)
	f.prev = append(f.prev, md.Get(PreviousAttemptsKey)...)
	for _, o := range opts {
		if tr, ok := o.(grpc.TrailerCallOption); ok && i < len(f.trailers) {
			*tr.TrailerAddr = f.trailers[i]
		}
	}
	if i < len(f.errs) {
		return f.errs[i]
	}
	return nil
}

func retryInfo(d time.Duration) error {
	st, _ := status.New(codes.ResourceExhausted, "quota").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(d)})
	return st.Err()
}

func TestInterceptor(t *testing.T) {
	unavailable := status.Error(codes.Unavailable, "down")
	for _, tt := range []struct {
		name     string
		cfg      Config
		errs     []error
		trailers []metadata.MD
		want     []time.Duration // arrival of each attempt; nil: check count only
		attempts int
		code     codes.Code
		is       error
	}{
		{name: "pushback honoured", errs: []error{unavailable}, trailers: []metadata.MD{{PushbackKey: {"1500"}}},
			want: []time.Duration{0, 1500 * time.Millisecond}, attempts: 2, code: codes.OK},
		{name: "negative pushback: no retry", errs: []error{unavailable}, trailers: []metadata.MD{{PushbackKey: {"-1"}}}, attempts: 1, code: codes.Unavailable},
		{name: "garbage pushback: no retry", errs: []error{unavailable}, trailers: []metadata.MD{{PushbackKey: {"x"}}}, attempts: 1, code: codes.Unavailable},
		{name: "RetryInfo honoured", errs: []error{retryInfo(2 * time.Second)}, want: []time.Duration{0, 2 * time.Second}, attempts: 2, code: codes.OK},
		{name: "non-retryable", errs: []error{status.Error(codes.InvalidArgument, "bad")}, attempts: 1, code: codes.InvalidArgument},
		{name: "wait past the budget", cfg: Config{Budget: time.Second}, errs: []error{retryInfo(2 * time.Second)}, attempts: 1, code: codes.ResourceExhausted, is: ErrBudget},
		{name: "attempt cap", cfg: Config{MaxAttempts: 3}, errs: []error{unavailable, unavailable, unavailable, unavailable}, attempts: 3, code: codes.Unavailable},
		{name: "retry budget", cfg: Config{MaxTokens: 2, MaxAttempts: 10}, errs: []error{unavailable, unavailable, unavailable, unavailable}, attempts: 3, code: codes.Unavailable, is: ErrThrottled},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tt.cfg.Rand = rand.New(rand.NewPCG(1, 2))
				in := New(tt.cfg)
				f := &fake{errs: tt.errs, trailers: tt.trailers, start: time.Now()}
				err := in.Unary(context.Background(), "/s/m", nil, nil, nil, f.invoke)
				if got := status.Code(err); got != tt.code {
					t.Fatalf("code = %v (%v); want %v", got, err, tt.code)
				}
				if tt.is != nil && !errors.Is(err, tt.is) {
					t.Errorf("err = %v; want it to wrap %v", err, tt.is)
				}
				if len(f.at) != tt.attempts {
					t.Fatalf("attempts = %d at %v; want %d", len(f.at), f.at, tt.attempts)
				}
				if tt.want != nil && !equal(f.at, tt.want) {
					t.Errorf("attempts at %v; want %v", f.at, tt.want)
				}
				for i, p := range f.prev {
					if want := string(rune('1' + i)); p != want {
						t.Errorf("retry %d sent %s=%s; want %s", i+1, PreviousAttemptsKey, p, want)
					}
				}
				if len(f.prev) != len(f.at)-1 {
					t.Errorf("%d retries carried %s; want %d", len(f.prev), PreviousAttemptsKey, len(f.at)-1)
				}
			})
		})
	}
}

func equal(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
