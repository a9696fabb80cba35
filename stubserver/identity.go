package stubserver

import (
	"net"
	"net/http"
	"strconv"
	"strings"
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

// Identify derives the simulated client and the logical-request key of r.
// A path /c/{client}/r/{seq}[/...] gives client "{client}" and key
// "{client}/{seq}". Otherwise the client is the X-Client-Id header, else the
// remote IP, and the key is "idem:" + the Idempotency-Key header, else
// "METHOD path". A retry is a later request with the same key.
func Identify(r *http.Request) (client, key string) {
	if c, seq, _, ok := splitPath(r.URL.Path); ok {
		// The key is the path's "{client}/r/{seq}" without "r/": build it.
		return c, c + "/" + seq
	}
	client = r.Header.Get("X-Client-Id")
	if client == "" {
		client = remoteIP(r.RemoteAddr)
	}
	if idem := r.Header.Get("Idempotency-Key"); idem != "" {
		return client, "idem:" + idem
	}
	return client, r.Method + " " + r.URL.Path
}

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
	if a := r.Header.Get("Authorization"); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
		return strings.TrimSpace(a[7:])
	}
	return r.Header.Get("X-Api-Key")
}
