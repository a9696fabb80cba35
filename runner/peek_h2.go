package runner

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2Preface begins a connection of HTTP/2 with prior knowledge: a gRPC
// client's (the exec route's gRPC programs).
var h2Preface = []byte(http2.ClientPreface)

// h2Head is the request head of the first stream of an HTTP/2
// connection's first bytes b, as an *http.Request carrying its headers
// (path from :path or x-retrylab-path, which a gRPC call's identity is),
// and whether b holds it whole: false while its HEADERS frame (and
// CONTINUATIONs) have not all arrived, or b is not HTTP/2.
func h2Head(b []byte) (*http.Request, bool) {
	rest, ok := bytes.CutPrefix(b, h2Preface)
	if !ok {
		return nil, false
	}
	fr := http2.NewFramer(io.Discard, bytes.NewReader(rest))
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	fr.MaxHeaderListSize = maxPeek
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, false // the rest is on its way
			}
			return nil, true // not a head we can read: stop peeking
		}
		mh, ok := f.(*http2.MetaHeadersFrame)
		if !ok {
			continue // SETTINGS, WINDOW_UPDATE, ...
		}
		req := &http.Request{Method: http.MethodPost, Header: http.Header{}}
		path := mh.PseudoValue("path")
		for _, hf := range mh.RegularFields() {
			if hf.Name == "x-retrylab-path" {
				path = hf.Value
				continue
			}
			req.Header.Add(http.CanonicalHeaderKey(hf.Name), hf.Value)
		}
		u, err := url.ParseRequestURI(path)
		if err != nil || !strings.HasPrefix(path, "/") {
			return nil, true
		}
		req.URL = u
		return req, true
	}
}
