package runner

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrylab/retrylab/analyzer"
	"github.com/retrylab/retrylab/timeline"
)

// fakeHeaderOnly plays clients (each with its base URL and API key) as a
// client that cannot vary its path does: request i of client K is GET
// /v1/items/i on the bare host, sent with no ready line first, and
//
//	header  X-Client-Id: K and X-Retrylab-Request: i
//	key     only its API key (Authorization: Bearer)
//
// Lines name /c/K/r/i.
func fakeHeaderOnly(how string, clients []int, baseOf func(int) string, keyOf func(j int) string, n int) int {
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 10 * time.Second}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for j, id := range clients {
		wg.Go(func() {
			u, err := url.Parse(baseOf(id))
			if err != nil {
				return
			}
			for i := range n {
				req, _ := http.NewRequest(http.MethodGet, u.Scheme+"://"+u.Host+"/v1/items/"+strconv.Itoa(i), nil)
				switch how {
				case "header":
					req.Header.Set("X-Client-Id", strconv.Itoa(id))
					req.Header.Set("X-Retrylab-Request", strconv.Itoa(i))
				case "key":
					req.Header.Set("Authorization", "Bearer "+keyOf(j))
				}
				line := fmt.Sprintf("ok /c/%d/r/%d", id, i)
				resp, err := hc.Do(req)
				if err != nil {
					line = fmt.Sprintf("fail /c/%d/r/%d error", id, i)
				} else {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode >= 300 {
						line = fmt.Sprintf("fail /c/%d/r/%d error status %d", id, i, resp.StatusCode)
					}
				}
				mu.Lock()
				fmt.Println(line)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return 0
}

// An exec fleet whose clients name themselves only by header (paths
// without /c/{client}/: X-Client-Id, or an API key the scenario gave)
// reaches the start barrier as soon as every process has sent its first
// request, not at the barrier's timeout, with one process per client and
// several clients per process. The X-Client-Id fleet, which names its
// requests by X-Retrylab-Request, is judged: its outcomes pair with the
// stub's records of them (no harness outcome, no lost request): PASS.
func TestRunExecBarrierHeaderIdentity(t *testing.T) {
	for _, how := range []string{"header", "key"} {
		for _, procs := range []int{6, 2} {
			t.Run(fmt.Sprintf("%s/processes=%d", how, procs), func(t *testing.T) {
				sc := mustParse(t, fmt.Sprintf(`
duration: 30s
server: {phases: [{respond: ok}]}
fleet: {clients: 6, processes: %d, requests: 2, timeout: 5s, api_keys: [{prefix: key-}]}
expect: {allow_unexercised: true}
`, procs))
				var buf bytes.Buffer
				start := time.Now()
				sum, err := Run(t.Context(), sc, RunOptions{Subject: fakeProgram(t, "header-only:"+how), Timeline: &buf, ReadyTimeout: 20 * time.Second})
				if err != nil {
					t.Fatal(err)
				}
				if el := time.Since(start); el > 10*time.Second {
					t.Errorf("run took %v; want the barrier to open at the fleet's first requests, not its 20s timeout", el)
				}
				_, end := decodeEnd(t, buf.Bytes())
				if end.FleetReady != 1 || len(end.Errors) != 0 || sum.Harness != 0 || sum.Results[timeline.ResultOK] != 12 {
					t.Errorf("end %+v, summary %+v; want the fleet ready at time zero, no errors, 12 ok outcomes, none harness", end, sum)
				}
				if how != "header" {
					return // the stub tells these clients apart by nothing it records
				}
				_, atts, outs := decodeAll(t, buf.Bytes())
				for _, o := range outs {
					if !strings.Contains(o.Key, " req:") {
						t.Errorf("outcome %+v; want the key the stub recorded, K req:N", o)
					}
				}
				if len(atts) != 12 {
					t.Errorf("%d attempts; want 12", len(atts))
				}
				v, err := analyzer.Analyze(bytes.NewReader(buf.Bytes()), analyzer.Options{})
				if err != nil {
					t.Fatal(err)
				}
				if v.Status != analyzer.VerdictPass {
					t.Errorf("verdict %s (failed %v, inconclusive %v); want PASS", v.Status, v.Failed(), v.Inconclusive)
				}
			})
		}
	}
}

// The gate reads a client from a request head the way the stub will: the
// path, else X-Client-Id, else the fleet's API key; a head cut short
// still names its client by its whole lines.
func TestClientOfHead(t *testing.T) {
	keys := map[string]int{"key-0": 0, "key-7": 7}
	tests := []struct {
		head string
		id   int
		ok   bool
	}{
		{"GET /c/3/r/0 HTTP/1.1\r\nHost: x\r\n\r\n", 3, true},
		{"GET http://127.0.0.1:1/c/4/r/1 HTTP/1.1\r\nHost: x\r\n\r\n", 4, true}, // absolute form
		{"GET /c/3/r/0 HTTP/1.1\r\nX-Client-Id: 5\r\n\r\n", 3, true},            // the path wins, as in the stub
		{"GET /v1/items/0 HTTP/1.1\r\nHost: x\r\nX-Client-Id: 5\r\n\r\n", 5, true},
		{"POST /v1/items HTTP/1.1\r\nHost: x\r\nX-Client-Id: 6\r\nContent-Length: 100\r\n\r\n{\"a\"", 6, true},
		{"GET /v1/items/0 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer key-7\r\n\r\n", 7, true},
		{"GET /v1/items/0 HTTP/1.1\r\nHost: x\r\nX-Api-Key: key-0\r\n\r\n", 0, true},
		{"GET /v1/items/0 HTTP/1.1\r\nHost: x\r\nX-Client-Id: 5\r\nCookie: abc", 5, true}, // cut short
		{"GET /v1/items/0 HTTP/1.1\nX-Client-Id: 2\n\n", 2, true},                         // bare LFs
		{"GET /v1/items/0 HTTP/1.1\r\nHost: x\r\nX-Client-Id: 8\r\n\r\n", 0, false},       // not in the fleet
		{"GET /v1/items/0 HTTP/1.1\r\nHost: x\r\nX-Client-Id: 05\r\n\r\n", 0, false},      // another client to the stub
		{"GET /v1/items/0 HTTP/1.1\r\nHost: x\r\nX-Client-Id: alice\r\n\r\n", 0, false},
		{"GET /v1/items/0 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer key-9\r\n\r\n", 0, false},
		{"GET /v1/items/0 HTTP/1.1\r\nHost: x\r\n\r\n", 0, false},
		{"GET /c/3/r/0 HTT", 0, false}, // no whole line
		{"", 0, false},
		{"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\n\n", 0, false}, // a TLS hello
	}
	for _, tt := range tests {
		id, ok := clientOfHead([]byte(tt.head), 8, keys)
		if id != tt.id || ok != tt.ok {
			t.Errorf("clientOfHead(%q) = %d, %v; want %d, %v", tt.head, id, ok, tt.id, tt.ok)
		}
	}
}

// FuzzClientOfHead: the gate parses what any client sends first. It
// never panics, and names only the fleet's clients.
func FuzzClientOfHead(f *testing.F) {
	for _, h := range []string{
		"GET /c/3/r/0 HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /v1/x HTTP/1.1\r\nX-Client-Id: 5\r\nAuthorization: Bearer key-1\r\n\r\n",
		"GET /v1/x HTTP/1.1\r\nX-Client-Id: 5\r\nCookie: a",
		"GET http://h/c/1/r/0 HTTP/1.0\n\n",
		"\r\n\r\n",
	} {
		f.Add([]byte(h))
	}
	keys := map[string]int{"key-1": 1}
	f.Fuzz(func(t *testing.T, h []byte) {
		orig := bytes.Clone(h)
		id, ok := clientOfHead(h, 8, keys)
		if ok && (id < 0 || id >= 8) {
			t.Errorf("clientOfHead(%q) = %d; want a client of the fleet's 8", h, id)
		}
		if !bytes.Equal(h, orig) {
			t.Errorf("clientOfHead changed its input %q to %q", orig, h)
		}
	})
}
