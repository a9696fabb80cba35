// Package stubgrpc serves a stubserver.Server over gRPC: the front end of
// a scenario with `protocol: grpc` (or `retrylab serve --grpc`). It answers
// any method (grpc.UnknownServiceHandler), so a client brings its own
// proto, and decides every call with the stub's one decision engine —
// phases, quotas, layered limits, capacity, faults, recording — by handing
// it the call as the HTTP request it stands for: the method POST-ed as
// stubserver.MethodGRPC, the metadata as headers, the request message as
// the body. The decided HTTP status is answered as its gRPC code
// (stubserver.GRPCCode), the wait as the grpc-retry-pushback-ms trailer or
// a google.rpc.RetryInfo detail. docs/grpc.md has the whole mapping.
//
// Only this package of the stub imports grpc, so an HTTP stub does not.
package stubgrpc

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/retrylab/retrylab/stubserver"
)

// New builds the gRPC front end of s, for stubserver.Options.NewFrontEnd.
func New(s *stubserver.Server) stubserver.FrontEnd { return NewHandler(s) }

// Importing the package makes it gRPC's front end (RegisterFrontEnd).
func init() {
	stubserver.RegisterFrontEnd(stubserver.ProtocolGRPC, func(h http.Handler) stubserver.FrontEnd { return NewHandler(h) })
}

// NewHandler builds a gRPC front end deciding every call with h: a
// *stubserver.Server, or what dispatches to one (serve's control API
// swaps its stub between recordings).
func NewHandler(h http.Handler) *FrontEnd {
	f := &FrontEnd{s: h, conns: map[string]net.Conn{}}
	f.srv = grpc.NewServer(
		grpc.UnknownServiceHandler(f.handle),
		// Any message, of any proto: the stub reads its bytes (for the
		// write's digest, as an HTTP body's) and answers an empty one.
		grpc.ForceServerCodecV2(rawCodec{}),
		grpc.MaxRecvMsgSize(stubserver.BodyDigestBytes+1<<10),
		// Calls run on goroutines kept from call to call, whose stacks
		// have grown to what a call needs, rather than on a new one each
		// that grows its stack anew; with all of them busy, a call gets a
		// new goroutine as without workers (no call waits for one).
		grpc.NumStreamWorkers(uint32(8*runtime.GOMAXPROCS(0))),
		// The call's metadata as the transport decoded it, for handle to
		// read without metadata.FromIncomingContext's copy of each value
		// (rawMetadata). Experimental in grpc-go, as ForceServerCodecV2 is.
		grpc.InTapHandle(func(ctx context.Context, info *tap.Info) (context.Context, error) {
			return context.WithValue(ctx, rawMetadataKey{}, info.Header), nil
		}),
	)
	return f
}

// FrontEnd serves gRPC calls by an http.Handler's decisions (see the
// package doc). It implements stubserver.FrontEnd.
type FrontEnd struct {
	s   http.Handler
	srv *grpc.Server

	mu    sync.Mutex
	conns map[string]net.Conn // by remote address: a reset closes its call's
}

// Serve answers calls on l until Stop or GracefulStop, then returns nil.
func (f *FrontEnd) Serve(l net.Listener) error {
	err := f.srv.Serve(&trackListener{Listener: l, f: f})
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// GracefulStop stops accepting and waits for the calls being answered.
func (f *FrontEnd) GracefulStop() { f.srv.GracefulStop() }

// Stop closes every connection at once.
func (f *FrontEnd) Stop() { f.srv.Stop() }

// handle answers one call, whatever its method.
func (f *FrontEnd) handle(_ any, stream grpc.ServerStream) error {
	ctx := stream.Context()
	// Behind a proxy the stub may still be deciding the call when the
	// proxy has answered it: its objects are then its own, not pooled.
	pt := f.proxyTimeout()
	var c *callState
	if pt > 0 {
		c = newCall()
	} else {
		c = calls.Get().(*callState)
		defer c.release()
	}
	if err := stream.RecvMsg(&c.body); err != nil {
		return err
	}
	method, _ := grpc.MethodFromServerStream(stream)
	path := method
	for k, v := range rawMetadata(ctx) {
		switch {
		case k == stubserver.MetaPath && len(v) > 0:
			path = v[0]
		case k != "" && k[0] != ':':
			// The values are copied, into the call's own array: the
			// handler gets a header of its own, as from
			// FromIncomingContext.
			n := len(c.values)
			c.values = append(c.values, v...)
			c.header[canonicalKey(k)] = c.values[n:len(c.values):len(c.values)]
		}
	}
	var remote string
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		remote = p.Addr.String() // a trackedConn's: no allocation
	}
	c.url.Path = path
	var body io.ReadCloser = http.NoBody // as net/http gives an empty body
	if len(c.body) > 0 {
		c.reader.Reset(c.body)
		body = &c.reader
	}
	req := http.Request{
		Method:        stubserver.MethodGRPC,
		URL:           &c.url,
		Proto:         "HTTP/2.0",
		ProtoMajor:    2,
		Header:        c.header,
		Body:          body,
		ContentLength: int64(len(c.body)),
		RemoteAddr:    remote,
		RequestURI:    method,
	}
	r := req.WithContext(ctx)
	w := &c.answer
	if pt > 0 {
		if !f.serveBehindProxy(w, r, pt) {
			return status.Error(codes.Unavailable, "503 Service Unavailable (proxy timeout)")
		}
	} else {
		f.s.ServeHTTP(w, r)
	}

	if w.hijacked {
		// A fault: reset (or a hang let go of at shutdown). An HTTP/2
		// connection carries every call of its channel: a reset breaks
		// them all, as a real one would. A client already gone
		// (abandoned) is left alone.
		if ctx.Err() == nil {
			f.reset(remote)
		}
		return status.Error(codes.Unavailable, "retrylab: connection reset")
	}
	if trailer := w.trailer(c.trailer); trailer != nil {
		// SetTrailer copies it (metadata.Join): c.trailer can be reused.
		grpc.SetTrailer(ctx, trailer)
	}
	code := stubserver.GRPCCode(w.status)
	if code == stubserver.CodeOK {
		return stream.SendMsg(&emptyMessage)
	}
	st := status.New(codes.Code(code), statusMessage(w.status))
	if v := header(w.header, stubserver.HeaderRetryInfo); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			if with, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(d)}); err == nil {
				st = with
			}
		}
	}
	return st.Err()
}

// rawMetadataKey is the context key of a call's metadata as its
// transport decoded it (NewHandler's tap).
type rawMetadataKey struct{}

// rawMetadata is the call's incoming metadata, not to be modified: the
// transport's own (its keys lowercase, as HTTP/2 sends them), else, for a
// call that passed no tap, a copy.
func rawMetadata(ctx context.Context) metadata.MD {
	if md, ok := ctx.Value(rawMetadataKey{}).(metadata.MD); ok {
		return md
	}
	md, _ := metadata.FromIncomingContext(ctx)
	return md
}

// emptyMessage is the answer of an OK call: an empty message of any type.
// SendMsg only reads it.
var emptyMessage = []byte{}

// callState is what the front end builds for one call: the request the stub
// decides, its answer, and the trailer. Calls are pooled (calls): a call's
// objects are garbage the moment it is answered, and at tens of thousands
// of calls a second allocating them anew cost as much as the decision.
type callState struct {
	body    []byte // the request message, its capacity kept
	url     url.URL
	header  http.Header
	values  []string // the header's values
	reader  bodyReader
	answer  answer
	trailer metadata.MD
}

var calls = sync.Pool{New: func() any { return newCall() }}

func newCall() *callState {
	return &callState{header: make(http.Header, 8), answer: answer{header: make(http.Header, 4)}, trailer: make(metadata.MD, 2)}
}

// release returns c to the pool, emptied. A message far larger than the
// usual is let go rather than kept by the pool.
func (c *callState) release() {
	if cap(c.body) > 4<<10 {
		c.body = nil
	}
	c.body = c.body[:0]
	c.url = url.URL{}
	clear(c.header)
	clear(c.values)
	c.values = c.values[:0]
	c.reader.Reset(nil)
	clear(c.answer.header)
	c.answer.status, c.answer.hijacked = 0, false
	clear(c.trailer)
	calls.Put(c)
}

// bodyReader is the request body: the message's bytes.
type bodyReader struct{ bytes.Reader }

func (*bodyReader) Close() error { return nil }

// header is the first value of h's canonical key (Header.Get without its
// canonicalization).
func header(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// canonicalKeys are the canonical forms of the metadata keys a call
// usually carries, and of those the stub reads: their lookup costs less
// than textproto's allocation of each.
var canonicalKeys = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{
		"content-type", "user-agent", "te", "grpc-accept-encoding", "grpc-timeout",
		"x-client-id", "x-retrylab-request", "idempotency-key", "authorization", "x-api-key",
		"grpc-previous-rpc-attempts", "traceparent", "tracestate", "grpc-trace-bin", "grpc-tags-bin",
	} {
		m[k] = textproto.CanonicalMIMEHeaderKey(k)
	}
	return m
}()

// canonicalKey is the http.Header key of the metadata key k.
func canonicalKey(k string) string {
	if c, ok := canonicalKeys[k]; ok {
		return c
	}
	return textproto.CanonicalMIMEHeaderKey(k)
}

// statusMessages are the messages of the HTTP statuses the stub answers,
// "503 Service Unavailable", built once.
var statusMessages = func() []string {
	m := make([]string, 600)
	for i := range m {
		m[i] = strconv.Itoa(i) + " " + http.StatusText(i)
	}
	return m
}()

// statusMessage is the message of a call answered with the HTTP status.
func statusMessage(status int) string {
	if status >= 0 && status < len(statusMessages) {
		return statusMessages[status]
	}
	return strconv.Itoa(status) + " " + http.StatusText(status)
}

// proxyTimeout is the handler's proxy timeout (stubserver.Server's
// ProxyTimeout), 0 when it has none.
func (f *FrontEnd) proxyTimeout() time.Duration {
	if p, ok := f.s.(interface{ ProxyTimeout() time.Duration }); ok {
		return p.ProxyTimeout()
	}
	return 0
}

// serveBehindProxy decides r as a proxy with timeout d in front of the
// stub would see it answered: it reports whether the stub answered within
// d. If not, the proxy has given up on the call: r's context is
// cancelled, so the stub records the attempt abandoned (its service, if
// it gets one, wasted), as a server does whose caller went away; the
// caller gets the proxy's UNAVAILABLE.
func (f *FrontEnd) serveBehindProxy(w *answer, r *http.Request, d time.Duration) bool {
	ctx, cancel := context.WithCancel(r.Context())
	done := make(chan struct{})
	go func() {
		defer cancel()
		defer close(done)
		f.s.ServeHTTP(w, r.WithContext(ctx))
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
	}
	select {
	case <-done: // answered at the same instant: the answer wins
		return true
	default:
		cancel()
		return false
	}
}

// reset closes the connection of the call from remote, at once (RST on
// TCP).
func (f *FrontEnd) reset(remote string) {
	f.mu.Lock()
	c := f.conns[remote]
	f.mu.Unlock()
	if c == nil {
		return
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

// answer is the stub's answer to one call as ServeHTTP writes it.
type answer struct {
	header   http.Header
	status   int
	hijacked bool
}

func (w *answer) Header() http.Header { return w.header }

func (w *answer) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *answer) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return len(p), nil
}

// Hijack is how the stub applies a fault to an HTTP connection; the front
// end applies it to the call's once ServeHTTP returns.
func (w *answer) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w.hijacked = true
	return nopConn{}, nil, nil
}

// trailer is what of the answer's headers a gRPC client gets, as trailing
// metadata: the pushback and the rate-limit headers; nil for none. It
// fills md (empty) when there are any.
func (w *answer) trailer(md metadata.MD) metadata.MD {
	n := 0
	for k, v := range w.header {
		var lk string
		switch {
		case k == stubserver.HeaderPushback:
			lk = pushbackKey
		case hasPrefixFold(k, "ratelimit"), hasPrefixFold(k, "x-ratelimit"):
			lk = strings.ToLower(k)
		default:
			continue
		}
		if md == nil {
			md = metadata.MD{}
		}
		md[lk] = v
		n++
	}
	if n == 0 {
		return nil
	}
	return md
}

// pushbackKey is stubserver.HeaderPushback as gRPC metadata.
var pushbackKey = strings.ToLower(stubserver.HeaderPushback)

// hasPrefixFold reports whether s begins with prefix, in any case.
func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// nopConn is the connection a hijacking stub closes: the front end then
// resets the call's real one.
type nopConn struct{ net.Conn }

func (nopConn) Close() error { return nil }

// trackListener records each accepted connection by its remote address,
// so that a reset can find its call's.
type trackListener struct {
	net.Listener
	f *FrontEnd
}

func (l *trackListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	key := c.RemoteAddr().String()
	tc := &trackedConn{Conn: c, f: l.f, key: key, remote: addr{Addr: c.RemoteAddr(), s: key}}
	l.f.mu.Lock()
	l.f.conns[key] = c
	l.f.mu.Unlock()
	return tc, nil
}

type trackedConn struct {
	net.Conn
	f      *FrontEnd
	key    string
	remote addr
	once   sync.Once
}

// RemoteAddr is the connection's, its string made once: gRPC gives it to
// every call (peer.Peer.Addr), and each call's record names it.
func (c *trackedConn) RemoteAddr() net.Addr { return &c.remote }

// addr is a net.Addr with its String kept.
type addr struct {
	net.Addr
	s string
}

func (a *addr) String() string { return a.s }

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.f.mu.Lock()
		if c.f.conns[c.key] == c.Conn {
			delete(c.f.conns, c.key)
		}
		c.f.mu.Unlock()
	})
	return c.Conn.Close()
}

// rawCodec passes messages as their bytes: *[]byte both ways.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	b, ok := v.(*[]byte)
	if !ok {
		return nil, errors.New("stubgrpc: marshal: not *[]byte")
	}
	return mem.BufferSlice{mem.SliceBuffer(*b)}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	b, ok := v.(*[]byte)
	if !ok {
		return errors.New("stubgrpc: unmarshal: not *[]byte")
	}
	// Into *b's own capacity: a pooled call's buffer is reused.
	*b = (*b)[:0]
	for _, buf := range data {
		*b = append(*b, buf.ReadOnlyData()...)
	}
	return nil
}

var _ encoding.CodecV2 = rawCodec{}
