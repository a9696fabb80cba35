package stubserver

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Protocols a stub speaks (Config.Protocol).
const (
	ProtocolHTTP = "http" // the default ("" too)
	// ProtocolGRPC: the stub answers gRPC calls through a FrontEnd
	// (stubserver/stubgrpc), deciding each as it decides an HTTP request
	// and answering the gRPC code the decided status maps to (GRPCCode).
	ProtocolGRPC = "grpc"
)

// The forms of the wait a gRPC stub sends with a throttling answer
// (RetryAfter.Form under ProtocolGRPC; FormNone sends none). Each but the
// malformed ones sets the attempt's not_before.
const (
	// FormPushback: the grpc-retry-pushback-ms trailer, the delay in
	// whole milliseconds (rounded up), as gRPC's A6 retry design reads it.
	FormPushback = "pushback"
	// FormPushbackNegative: a negative pushback ("-N"), which A6 defines
	// as "do not retry": no not_before.
	FormPushbackNegative = "pushback-negative"
	// FormPushbackGarbage: a pushback that is not an integer, which A6
	// also reads as "do not retry": no not_before.
	FormPushbackGarbage = "pushback-garbage"
	// FormRetryInfo: google.rpc.RetryInfo in the status details, its
	// retry_delay the delay to the millisecond (rounded up): what Google's
	// APIs send.
	FormRetryInfo = "retry-info"
)

// The headers a FrontEnd reads from the stub's answer to send its wait:
// HeaderPushback's value is the grpc-retry-pushback-ms trailer as sent,
// HeaderRetryInfo's the RetryInfo retry_delay as a Go duration ("1.5s").
// Neither reaches the client as a header.
const (
	HeaderPushback  = "Grpc-Retry-Pushback-Ms"
	HeaderRetryInfo = "X-Retrylab-Retry-Info"
)

// The metadata a gRPC client is identified by (see Identify; metadata
// reach the stub's rules as the headers of the same names).
//
//   - MetaPath "x-retrylab-path": the fleet's own identity path,
//     /c/{client}/r/{seq}: a gRPC call has no path of its own (its :path
//     is the method), so the fleet and exec programs send the path an
//     HTTP client would have requested here.
//   - x-client-id and x-retrylab-request (RequestHeader), as for HTTP.
//   - Without them: the peer's IP, and the method with a digest of the
//     request message.
const MetaPath = "x-retrylab-path"

// MethodGRPC is the method a gRPC attempt is recorded with: every call is
// an HTTP/2 POST, and whether its method is idempotent is declared in the
// client's proto, which the stub does not see; the idempotency check,
// which judges POST and PATCH, does not judge gRPC calls.
const MethodGRPC = "GRPC"

// gRPC status codes (google.golang.org/grpc/codes), by number.
const (
	CodeOK                 = 0
	CodeCanceled           = 1
	CodeUnknown            = 2
	CodeInvalidArgument    = 3
	CodeDeadlineExceeded   = 4
	CodeNotFound           = 5
	CodeAlreadyExists      = 6
	CodePermissionDenied   = 7
	CodeResourceExhausted  = 8
	CodeFailedPrecondition = 9
	CodeAborted            = 10
	CodeOutOfRange         = 11
	CodeUnimplemented      = 12
	CodeInternal           = 13
	CodeUnavailable        = 14
	CodeDataLoss           = 15
	CodeUnauthenticated    = 16
)

// CodeNames are the canonical names of the codes, by number.
var CodeNames = [...]string{"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
	"ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",
	"OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"}

// GRPCMapping is the stub's HTTP status → gRPC code table, the one rule a
// gRPC stub answers by: the phase decides an HTTP status, the client gets
// its code, the timeline records both. It follows google.rpc.Code's HTTP
// mapping (google/rpc/code.proto) where that maps one status to one code,
// and picks where it maps several (409: ABORTED, which a client may retry,
// not ALREADY_EXISTS). docs/grpc.md prints it; a test holds the two equal.
var GRPCMapping = []struct {
	Status int
	Code   int
}{
	{200, CodeOK},
	{400, CodeInvalidArgument},
	{401, CodeUnauthenticated},
	{403, CodePermissionDenied},
	{404, CodeNotFound},
	{408, CodeDeadlineExceeded},
	{409, CodeAborted},
	{412, CodeFailedPrecondition},
	{416, CodeOutOfRange},
	{422, CodeInvalidArgument},
	{429, CodeResourceExhausted},
	{499, CodeCanceled},
	{500, CodeInternal},
	{501, CodeUnimplemented},
	{502, CodeUnavailable},
	{503, CodeUnavailable},
	{504, CodeDeadlineExceeded},
}

// grpcCodes is GRPCMapping indexed by status; -1 where it has none.
var grpcCodes = func() [600]int8 {
	var t [600]int8
	for i := range t {
		t[i] = -1
	}
	for _, m := range GRPCMapping {
		t[m.Status] = int8(m.Code)
	}
	return t
}()

// GRPCCode is the gRPC code a stub speaking gRPC answers for HTTP status:
// GRPCMapping's, else OK for any other 2xx and UNKNOWN for anything else
// (as gRPC's own HTTP-to-code rule answers a status it does not know).
func GRPCCode(status int) int {
	if status >= 0 && status < len(grpcCodes) && grpcCodes[status] >= 0 {
		return int(grpcCodes[status])
	}
	if status >= 200 && status < 300 {
		return CodeOK
	}
	return CodeUnknown
}

// A FrontEnd serves the Server's decisions over a protocol other than
// HTTP/1.1 (stubserver/stubgrpc serves gRPC). Serve blocks until Stop or
// GracefulStop; the Server calls GracefulStop from Shutdown and Stop from
// Close, after releasing its hanging requests.
type FrontEnd interface {
	Serve(l net.Listener) error
	GracefulStop()
	Stop()
}

// frontEnds are the registered front ends by protocol (RegisterFrontEnd).
var frontEnds sync.Map // protocol → func(http.Handler) FrontEnd

// RegisterFrontEnd makes newFrontEnd the front end of protocol: what New
// uses when Options.NewFrontEnd is nil, and what FrontEndFor returns. A
// front end's package registers itself when imported (stubgrpc), so only
// a program that imports it links its protocol's library.
func RegisterFrontEnd(protocol string, newFrontEnd func(h http.Handler) FrontEnd) {
	frontEnds.Store(protocol, newFrontEnd)
}

// FrontEndFor is the front end registered for protocol, nil for none.
func FrontEndFor(protocol string) func(h http.Handler) FrontEnd {
	if f, ok := frontEnds.Load(protocol); ok {
		return f.(func(http.Handler) FrontEnd)
	}
	return nil
}

// Protocol is the protocol the server speaks: ProtocolHTTP or
// ProtocolGRPC.
func (s *Server) Protocol() string {
	if s.cfg.Protocol == "" {
		return ProtocolHTTP
	}
	return s.cfg.Protocol
}

// gracefulStop runs the front end's GracefulStop until ctx ends, then
// stops it at once.
func gracefulStop(ctx context.Context, f FrontEnd) error {
	done := make(chan struct{})
	go func() {
		f.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		f.Stop()
		<-done
		return ctx.Err()
	}
}

// grpcWait sets the gRPC wait of form for a delay of d from nowRun on h
// and a, and returns the not_before to record (ok false: none).
func grpcWait(form string, d time.Duration, h http.Header, nowRun int64) (pushback, retryInfo string, notBefore int64, ok bool) {
	ms := (max(d, 0) + time.Millisecond - 1) / time.Millisecond
	switch form {
	case FormPushback:
		v := strconv.FormatInt(int64(ms), 10)
		h[HeaderPushback] = []string{v}
		return v, "", nowRun + int64(ms*time.Millisecond), true
	case FormPushbackNegative:
		v := "-" + strconv.FormatInt(max(1, int64(ms)), 10)
		h[HeaderPushback] = []string{v}
		return v, "", 0, false
	case FormPushbackGarbage:
		h[HeaderPushback] = []string{garbageValue}
		return garbageValue, "", 0, false
	case FormRetryInfo:
		delay := ms * time.Millisecond
		h[HeaderRetryInfo] = []string{delay.String()}
		return "", protoDuration(delay), nowRun + int64(delay), true
	}
	return "", "", 0, false
}

// protoDuration is d in google.protobuf.Duration's JSON form: seconds with
// three decimals ("1.500s").
func protoDuration(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', 3, 64) + "s"
}

// grpcForm reports whether form is one of the gRPC waits.
func grpcForm(form string) bool {
	switch form {
	case FormPushback, FormPushbackNegative, FormPushbackGarbage, FormRetryInfo:
		return true
	}
	return false
}

// previousAttempts is the grpc-previous-rpc-attempts metadata of a call
// (0 when absent or not a count).
func previousAttempts(h http.Header) int {
	v := header(h, "Grpc-Previous-Rpc-Attempts")
	if v == "" {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > 1<<20 {
		return 0
	}
	return n
}

// ProxyTimeout is how long the proxy in front of a gRPC stub waits for
// the stub's answer before it answers UNAVAILABLE itself
// (Config.ProxyTimeout; 0: no proxy). A FrontEnd reads it from its
// handler when the handler has it.
func (s *Server) ProxyTimeout() time.Duration { return s.cfg.ProxyTimeout }
