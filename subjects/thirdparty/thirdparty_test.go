package thirdparty

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestAttemptOf: each attempt carries the body it is given in Body, GetBody
// (every call a fresh reader) and ContentLength, whatever the original
// request held; a nil body gives none; the original is left alone.
func TestAttemptOf(t *testing.T) {
	read := func(rc io.ReadCloser) string {
		t.Helper()
		b, err := io.ReadAll(rc)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	orig, err := http.NewRequest("POST", "http://127.0.0.1/c/0/r/0", strings.NewReader("old body"))
	if err != nil {
		t.Fatal(err)
	}

	r := attemptOf(context.Background(), orig, []byte("new"))
	if got := read(r.Body); got != "new" {
		t.Errorf("Body = %q; want %q", got, "new")
	}
	if r.ContentLength != 3 {
		t.Errorf("ContentLength = %d; want 3", r.ContentLength)
	}
	if r.GetBody == nil {
		t.Fatal("GetBody = nil; want one that reads the body")
	}
	for i := range 2 {
		b, err := r.GetBody()
		if err != nil {
			t.Fatal(err)
		}
		if got := read(b); got != "new" {
			t.Errorf("GetBody() #%d reads %q; want %q", i+1, got, "new")
		}
	}
	if got := read(orig.Body); got != "old body" || orig.ContentLength != 8 {
		t.Errorf("original request: body %q, length %d; want %q, 8", got, orig.ContentLength, "old body")
	}

	r = attemptOf(context.Background(), orig, nil)
	if r.Body != http.NoBody || r.GetBody != nil || r.ContentLength != 0 {
		t.Errorf("nil body: Body %v, GetBody set %v, ContentLength %d; want NoBody, false, 0", r.Body, r.GetBody != nil, r.ContentLength)
	}
}
