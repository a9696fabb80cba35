package stubserver

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/retrylab/retrylab/timeline"
	"sync"
	"unicode/utf8"
)

// RequestPath is the path of logical request seq of client: "/c/17/r/42".
// A simulated client's base URL is the server's base URL + "/c/17/".
func RequestPath(client, seq int) string {
	b := make([]byte, 0, 24)
	b = append(b, "/c/"...)
	b = strconv.AppendInt(b, int64(client), 10)
	b = append(b, "/r/"...)
	b = strconv.AppendInt(b, int64(seq), 10)
	return string(b)
}

// splitPath parses /c/{client}/r/{seq}[/rest]. ok is false for any other
// shape, including empty segments.
func splitPath(p string) (client, seq, rest string, ok bool) {
	s, found := strings.CutPrefix(p, "/c/")
	if !found {
		return "", "", "", false
	}
	client, s, found = strings.Cut(s, "/")
	if !found || client == "" {
		return "", "", "", false
	}
	s, found = strings.CutPrefix(s, "r/")
	if !found {
		return "", "", "", false
	}
	seq, rest, _ = strings.Cut(s, "/")
	if seq == "" {
		return "", "", "", false
	}
	return client, seq, "/" + rest, true
}

// MaxIDBytes bounds every client-provided identity: the client id (the
// path's {client} or X-Client-Id), the API key (Authorization: Bearer or
// X-Api-Key), the Idempotency-Key, and what the server derives from them
// and keys tables by: the logical-request key and, for a per-endpoint
// quota, the endpoint. A request with a longer one is answered 400 and
// recorded with the identity cut to MaxIDBytes (see capID), so hostile
// input cannot grow the server's memory by more than this per key.
const MaxIDBytes = 256

// truncMarker ends an identity cut to MaxIDBytes.
const truncMarker = "...[truncated]"

// capID joins parts, cut to MaxIDBytes with truncMarker at the end when
// longer (the cut falls on a UTF-8 boundary).
func capID(parts ...string) string {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	if n <= MaxIDBytes {
		return strings.Join(parts, "")
	}
	b := make([]byte, 0, MaxIDBytes)
	room := MaxIDBytes - len(truncMarker)
	for _, p := range parts {
		if cut := room - len(b); len(p) > cut {
			for cut > 0 && !utf8.RuneStart(p[cut]) {
				cut-- // do not split a rune
			}
			b = append(b, p[:cut]...)
			break
		}
		b = append(b, p...)
	}
	return string(append(b, truncMarker...))
}

// tooLong names the first identity of r longer than MaxIDBytes ("" when
// none), looking only at lengths: nothing is built or copied, and the body
// is not read.
func tooLong(r *http.Request, endpointKey bool) string {
	if len(header(r.Header, "X-Client-Id")) > MaxIDBytes {
		return "X-Client-Id"
	}
	if len(header(r.Header, "Idempotency-Key")) > MaxIDBytes {
		return "Idempotency-Key"
	}
	if len(apiKey(r)) > MaxIDBytes {
		return "API key"
	}
	if len(r.RemoteAddr) > MaxIDBytes {
		return "client id" // never from net/http; a hand-made request's
	}
	var keyLen, endpointLen int
	if c, seq, rest, ok := splitPath(r.URL.Path); ok {
		if len(c) > MaxIDBytes {
			return "client id"
		}
		keyLen = len(c) + 1 + len(seq)
		endpointLen = len(r.Method) + 1 + len(rest)
	} else {
		endpointLen = len(r.Method) + 1 + len(r.URL.Path)
		client := header(r.Header, "X-Client-Id")
		if client == "" {
			client = remoteIP(r.RemoteAddr)
		}
		if id := header(r.Header, RequestHeader); id != "" {
			keyLen = len(client) + len(" req:") + len(id)
		} else {
			keyLen = len(client) + 1 + endpointLen
			if digestsBody(r) {
				keyLen += len(" body:") + 2*digestBytes // the longest digest suffix
			}
		}
	}
	if keyLen > MaxIDBytes {
		return "request key"
	}
	if endpointKey && endpointLen > MaxIDBytes {
		return "endpoint"
	}
	return ""
}

// identifyCapped is Identify for a request that tooLong rejected: the
// client and key cut to MaxIDBytes, built without copying the long input.
func identifyCapped(r *http.Request) (client, key string) {
	if c, seq, _, ok := splitPath(r.URL.Path); ok {
		return capID(c), capID(c, "/", seq)
	}
	client = header(r.Header, "X-Client-Id")
	if client == "" {
		client = remoteIP(r.RemoteAddr)
	}
	if id := header(r.Header, RequestHeader); id != "" {
		return capID(client), capID(client, " req:", id)
	}
	if d := bodyDigest(r); d != "" {
		return capID(client), capID(client, " ", r.Method, " ", r.URL.Path, " body:", d)
	}
	return capID(client), capID(client, " ", r.Method, " ", r.URL.Path)
}

// RequestHeader names a logical request for a client that cannot vary its
// path (see Identify): attempts of one client carrying one value are one
// logical request, whatever their method, path and body. Only an
// application that sets it deliberately, once per logical request, should
// send it; tracing middleware's X-Request-Id, new on every attempt, is not
// read.
const RequestHeader = "X-Retrylab-Request"

// BodyDigestBytes bounds how much of a write's body Identify reads for its
// digest; a longer body is digested by its first BodyDigestBytes and its
// declared length.
const BodyDigestBytes = 64 << 10

// digestBytes is the size of a body digest, in bytes (hex doubles it).
const digestBytes = 8

// Identify derives the simulated client and the logical-request key of r:
// what a client cannot change by mistake between the attempts of one
// logical request.
//
//   - A path /c/{client}/r/{seq}[/...] (the fleet's own identity) gives
//     client "{client}" and key "{client}/{seq}".
//   - Otherwise the client is the X-Client-Id header, else the remote IP;
//     with an X-Retrylab-Request header (RequestHeader) the key is
//     "CLIENT req:VALUE".
//   - Otherwise the key is "CLIENT METHOD path" — the path without its
//     query, so a per-attempt cache-buster or signature timestamp does not
//     split a retry — and for a write (every method but GET, HEAD, OPTIONS
//     and TRACE) with a body, " body:DIGEST" on top: 16 hex digits of the
//     SHA-256 of the body's first BodyDigestBytes, and of its declared
//     length when it is longer ("?" for a chunked body of unknown length).
//     Identify reads that much of the body and puts it back, so the handler
//     and the upstream read it whole.
//
// The Idempotency-Key is not part of the key: it is evidence (recorded as
// Attempt.IdemKey), so a retry that changes it is the idempotency check's
// finding, not a new logical request. A retry is a later request with the
// same key. The Server answers 400 to a request whose identities are
// longer than MaxIDBytes.
func Identify(r *http.Request) (client, key string) {
	client, seq, byPath := identifyClient(r)
	if byPath {
		// The key is the path's "{client}/r/{seq}" without "r/": build it.
		return client, client + "/" + seq
	}
	if id := header(r.Header, RequestHeader); id != "" {
		return client, client + " req:" + id
	}
	if d := bodyDigest(r); d != "" {
		return client, client + " " + r.Method + " " + r.URL.Path + " body:" + d
	}
	return client, client + " " + r.Method + " " + r.URL.Path
}

// IdentifyClient is the simulated client of r, as Identify derives it
// (the path's {client}, else X-Client-Id, else the remote IP), without
// reading the body: what a harness that sees a request before the
// server does (an exec fleet's start barrier) tells its client by.
func IdentifyClient(r *http.Request) string {
	client, _, _ := identifyClient(r)
	return client
}

// identifyClient is Identify's client, and the path's {seq} when the
// path named both (byPath).
func identifyClient(r *http.Request) (client, seq string, byPath bool) {
	if c, seq, _, ok := splitPath(r.URL.Path); ok {
		return c, seq, true
	}
	client = header(r.Header, "X-Client-Id")
	if client == "" {
		client = remoteIP(r.RemoteAddr)
	}
	return client, "", false
}

// APIKey is the API key r carries, as the server's quotas read it (the
// Authorization Bearer token, else X-Api-Key; "" for none). A scenario's
// fleet.api_keys gives each client its own, so a harness can tell a
// client by it.
func APIKey(r *http.Request) string { return apiKey(r) }

// digestsBody reports whether r's key carries a digest of its body: a
// write (any method but the safe ones) that may have one.
func digestsBody(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return false
	}
	return r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0
}

// bodyDigest is the digest of a write's body Identify keys by, "" for none
// (not a write, or an empty body). It reads at most BodyDigestBytes+1
// bytes of r.Body and replaces r.Body with a reader that yields them again
// before the rest (closing the original).
func bodyDigest(r *http.Request) string {
	if !digestsBody(r) {
		return ""
	}
	// Read one byte past the bound: a body of exactly BodyDigestBytes is
	// then told from a longer one even without a declared length.
	buf := readPrefix(r.Body, r.ContentLength, BodyDigestBytes+1)
	r.Body = &replayBody{buf: buf, rest: r.Body}
	if len(buf) == 0 {
		return ""
	}
	var sum [sha256.Size]byte
	if len(buf) > BodyDigestBytes {
		h := sha256.New()
		h.Write(buf[:BodyDigestBytes])
		if r.ContentLength > 0 {
			h.Write(strconv.AppendInt([]byte("\x00len="), r.ContentLength, 10))
		} else {
			h.Write([]byte("\x00len=?"))
		}
		h.Sum(sum[:0])
	} else {
		sum = sha256.Sum256(buf)
	}
	var x [2 * digestBytes]byte
	hex.Encode(x[:], sum[:digestBytes])
	return string(x[:])
}

// readPrefix reads up to limit bytes of body (declared length n, -1 when
// unknown) into one buffer: sized at once when the length is known.
func readPrefix(body io.Reader, n int64, limit int) []byte {
	size := 512
	if n > 0 {
		size = int(min(n, int64(limit)))
	}
	buf := make([]byte, 0, size)
	for empty := 0; len(buf) < limit && empty < 100; { // 100 empty reads: no progress, as io's readers give up
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, min(cap(buf), limit-len(buf)))
		}
		m, err := body.Read(buf[len(buf):min(cap(buf), limit)])
		buf = buf[:len(buf)+m]
		if err != nil || n > 0 && int64(len(buf)) >= n {
			break // a body never yields more than its declared length
		}
		if m == 0 {
			empty++
		} else {
			empty = 0
		}
	}
	return buf
}

// replayBody is a request body whose first bytes were read for the
// digest: it yields them again, then the rest of the original.
type replayBody struct {
	buf  []byte
	rest io.ReadCloser
}

func (b *replayBody) Read(p []byte) (int, error) {
	if len(b.buf) > 0 {
		n := copy(p, b.buf)
		b.buf = b.buf[n:]
		return n, nil
	}
	return b.rest.Read(p)
}

func (b *replayBody) Close() error { return b.rest.Close() }

func remoteIP(addr string) string {
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}

// endpoint is what a per-endpoint quota counts: the method and the path
// below the identity prefix (/c/1/r/2/search → "GET /search"), or the
// whole path.
func endpoint(r *http.Request) string {
	if _, _, rest, ok := splitPath(r.URL.Path); ok {
		return r.Method + " " + rest
	}
	return r.Method + " " + r.URL.Path
}

// apiKey is the caller's API key: the Authorization Bearer token, else the
// X-Api-Key header; "" when neither (all anonymous callers share a quota).
func apiKey(r *http.Request) string {
	if a := header(r.Header, "Authorization"); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
		return strings.TrimSpace(a[7:])
	}
	return header(r.Header, "X-Api-Key")
}

// header returns the first value of a header whose canonical name is key.
// net/http canonicalizes the names of a request it parses, so a direct
// map lookup finds them without Header.Get's per-call canonicalization,
// which cost more than the rest of the stub's bookkeeping on the hot path.
// maxWaitClaimBytes cuts a recorded wait claim: a valid one is at most 16
// bytes (timeline.ParseWaitClaim), and a longer one is refused anyway.
const maxWaitClaimBytes = 32

// waitClaim is the client's X-Retrylab-Wait value as sent, cut at
// maxWaitClaimBytes; the analyzer parses and checks it.
func waitClaim(h http.Header) string {
	v := header(h, timeline.WaitHeader)
	if len(v) > maxWaitClaimBytes {
		v = v[:maxWaitClaimBytes]
	}
	return v
}

func header(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// attemptCounter numbers arrivals per key. It keeps two generations of
// keys, each at most maxKeys keys and maxKeyBytes bytes of key: when the
// current one fills, it becomes the previous one and the older is
// forgotten, so a key idle for two generations starts again at 1.
type attemptCounter struct {
	mu        sync.Mutex
	cur, prev map[string]int32
	curBytes  int // bytes of the keys in cur
}

func (c *attemptCounter) next(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.cur[key]
	if !ok && c.prev != nil {
		n = c.prev[key]
	}
	if !ok {
		if len(c.cur) >= maxKeys || c.curBytes+len(key) > maxKeyBytes {
			c.prev, c.cur = c.cur, make(map[string]int32)
			c.curBytes = 0
		}
		c.curBytes += len(key)
	}
	n++
	c.cur[key] = n
	return int(n)
}
