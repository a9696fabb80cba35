// Package grpcsubjects puts gRPC clients under test as subjects: grpc-go
// with no service config (its default), with an A6 retryPolicy, with
// retryPolicy and retryThrottling, with a hedgingPolicy;
// go-grpc-middleware/v2's retry interceptor at its defaults and with
// exponential backoff; and retrylab's reference interceptor
// (client/grpcretry). Importing it registers them (subjects.Register), so
// only code that imports it — the retrylab command, and the tests that
// judge gRPC — links grpc.
//
// Each simulated client (or process, with fleet.processes) gets its own
// channel (grpc.ClientConn), dialed through the harness's dial
// (subjects.Params.Dial) to the stub's address and closed when the run
// ends (Params.Run). A logical request is one unary call of Method with an
// empty message, whose metadata carry the request's identity path
// (x-retrylab-path, stubserver.MetaPath) and its API key
// (authorization). Attempts are counted by a stats handler (each attempt
// the channel began, transparent retries — which never left the client —
// not counted); the final code maps back to the HTTP status the stub
// decided (StatusOf).
package grpcsubjects

import (
	"context"
	"errors"
	"net"
	"net/http"
	"runtime/debug"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/retrylab/retrylab/client/grpcretry"
	"github.com/retrylab/retrylab/subjects"
)

// Method is the method every logical request calls: the stub answers any
// method, and this one is in the tiny proto the examples ship
// (examples/grpc/retrylab.proto: service retrylab.v1.Stub, rpc
// Call(google.protobuf.Empty) returns (google.protobuf.Empty)).
const Method = "/retrylab.v1.Stub/Call"

// Service is Method's service, the name service configs match.
const Service = "retrylab.v1.Stub"

// ProtocolGRPC is what Protocol returns: the stub these subjects need
// speaks gRPC.
const ProtocolGRPC = "grpc"

// StatusOf is the HTTP status a gRPC code stands for, google.rpc.Code's
// mapping (google/rpc/code.proto) with the stub's choices where it maps
// several codes to one status: the inverse of the stub's mapping on the
// codes the stub sends (docs/grpc.md).
func StatusOf(c codes.Code) int {
	switch c {
	case codes.OK:
		return 200
	case codes.Canceled:
		return 499
	case codes.InvalidArgument:
		return 400
	case codes.DeadlineExceeded:
		return 504
	case codes.NotFound:
		return 404
	case codes.AlreadyExists, codes.Aborted:
		return 409
	case codes.PermissionDenied:
		return 403
	case codes.ResourceExhausted:
		return 429
	case codes.FailedPrecondition:
		return 412
	case codes.OutOfRange:
		return 416
	case codes.Unimplemented:
		return 501
	case codes.Unavailable:
		return 503
	case codes.Unauthenticated:
		return 401
	}
	return 500 // UNKNOWN, INTERNAL, DATA_LOSS
}

// subject is one gRPC client configuration under test.
type subject struct {
	name    string
	module  string // the library's module, for its version
	summary string
	// stated is the policy it states (nil: none); replayable whether it
	// draws jitter only from Params.Rand.
	stated     func(p subjects.Params) *subjects.Stated
	replayable bool
	// callDeadline: the application's per-attempt timeout
	// (fleet.attempt_timeout) is the call's deadline, the only place
	// grpc-go has for it; else the subject's options take it.
	callDeadline bool
	// options are the channel's dial options beyond the harness's.
	options func(p subjects.Params) []grpc.DialOption
}

func (s subject) Name() string     { return s.name }
func (s subject) Protocol() string { return ProtocolGRPC }

func (s subject) Describe(p subjects.Params) subjects.Info {
	v := "(devel)"
	if s.module != "" {
		v = moduleVersion(s.module)
	}
	var st *subjects.Stated
	if s.stated != nil {
		st = s.stated(p)
	}
	return subjects.Info{Version: v, Stated: st, Summary: s.summary, Replayable: s.replayable}
}

// New returns a Caller over a channel of its own, dialed at its first
// call (the stub's address is the request's host) through p.Dial; next,
// the harness's HTTP transport, is not used: gRPC has a transport of its
// own.
func (s subject) New(_ http.RoundTripper, p subjects.Params) subjects.Caller {
	var (
		once sync.Once
		cc   *grpc.ClientConn
		err  error
	)
	return func(ctx context.Context, req *http.Request) (*http.Response, error) {
		once.Do(func() { cc, err = s.dial(req.URL.Host, p) })
		if err != nil {
			return nil, err
		}
		ctx, c := subjects.WithCounter(ctx)
		md := []string{"x-retrylab-path", req.URL.Path}
		if a := req.Header.Get("Authorization"); a != "" {
			md = append(md, "authorization", a)
		}
		ctx = metadata.AppendToOutgoingContext(ctx, md...)
		if s.callDeadline && p.AttemptTimeout > 0 {
			// grpc-go has no per-attempt timeout: an application's
			// goes on the call.
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, p.AttemptTimeout)
			defer cancel()
		}
		callErr := cc.Invoke(ctx, Method, &emptypb.Empty{}, &emptypb.Empty{})
		if callErr == nil {
			return &http.Response{StatusCode: 200, Status: "200 OK", Body: http.NoBody, Request: req.WithContext(ctx), Header: http.Header{}}, nil
		}
		return nil, failure(callErr, c.Attempts())
	}
}

// dial opens the channel to addr.
func (s subject) dial(addr string, p subjects.Params) (*grpc.ClientConn, error) {
	d := p.Dial
	if d == nil {
		d = (&net.Dialer{Timeout: 5 * time.Second}).DialContext
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return d(ctx, "tcp", a) }),
		grpc.WithStatsHandler(counter{}),
	}
	if s.options != nil {
		opts = append(opts, s.options(p)...)
	}
	cc, err := grpc.NewClient("passthrough:///"+addr, opts...)
	if err != nil {
		return nil, err
	}
	if p.Run != nil {
		context.AfterFunc(p.Run, func() { cc.Close() })
	}
	return cc, nil
}

// failure is the subjects.Error of a call that failed with err after
// attempts.
func failure(err error, attempts int) error {
	st := status.Convert(err)
	code := StatusOf(st.Code())
	result := subjects.ResultGaveUp
	switch {
	case errors.Is(err, grpcretry.ErrBudget):
		result = subjects.ResultBudget
	case st.Code() == codes.Canceled:
		result = subjects.ResultError
	case code >= 400 && code < 500 && code != 408 && code != 429:
		result = subjects.ResultNonRetryable
	}
	return &subjects.Error{Result: result, Status: code, Attempts: attempts, Err: err}
}

// counter is the stats handler that counts each call's attempts on its
// subjects.Counter.
type counter struct{}

func (counter) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (counter) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}
func (counter) HandleConn(context.Context, stats.ConnStats) {}

func (counter) HandleRPC(ctx context.Context, s stats.RPCStats) {
	switch s := s.(type) {
	case *stats.Begin:
		if !s.IsTransparentRetryAttempt {
			if c := subjects.CounterOf(ctx); c != nil {
				c.Count(0)
			}
		}
	}
}

// moduleVersion is the version of module linked into the binary.
func moduleVersion(module string) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == module {
				if d.Replace != nil {
					return d.Replace.Version
				}
				return d.Version
			}
		}
	}
	return "unknown"
}
