package stubserver

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrylab/retrylab/internal/procstat"
	"github.com/retrylab/retrylab/internal/testenv"
	"github.com/retrylab/retrylab/timeline"
)

// TestIDLimits: every client-provided identity longer than MaxIDBytes is
// answered 400 naming it, and recorded cut to MaxIDBytes; one that fits
// is served. A client that retries the rejected request is numbered as
// retrying (the non-retryable check must see it).
func TestIDLimits(t *testing.T) {
	long := strings.Repeat("x", MaxIDBytes+1)
	huge := strings.Repeat("h", 60<<10)
	tests := []struct {
		name     string
		key      string // quota key
		path     string
		hdr      []string
		status   int
		bodyHas  string
		recClnt  string // recorded client, "" to skip
		recKeyOK func(string) bool
	}{
		{"client id in path", "", "/c/" + long + "/r/1", nil, 400, "client id longer than 256 bytes", capID(long), nil},
		{"client id of 256 bytes fits", "", "/c/" + long[:MaxIDBytes] + "/r/1", nil, 400, "request key longer", long[:MaxIDBytes], nil},
		{"client and key fit", "", "/c/" + long[:MaxIDBytes-2] + "/r/1", nil, 200, "200 OK", long[:MaxIDBytes-2], nil},
		{"request seq", "", "/c/1/r/" + long, nil, 400, "request key longer", "1", nil},
		{"X-Client-Id of 60 KB", "", "/x", []string{"X-Client-Id", huge}, 400, "X-Client-Id longer", capID(huge), nil},
		{"Idempotency-Key", "", "/pay", []string{"Idempotency-Key", long}, 400, "Idempotency-Key longer", "", nil},
		{"Idempotency-Key of 256 bytes fits: it is no part of the key", "", "/pay", []string{"Idempotency-Key", long[:MaxIDBytes]}, 200, "200 OK", "192.0.2.1", nil},
		{"X-Retrylab-Request", "", "/pay", []string{RequestHeader, long[:MaxIDBytes-10]}, 400, "request key longer", "192.0.2.1", nil},
		{"bearer token", "", "/c/1/r/1", []string{"Authorization", "Bearer " + long}, 400, "API key longer", "1", nil},
		{"X-Api-Key", "", "/c/1/r/1", []string{"X-Api-Key", long}, 400, "API key longer", "1", nil},
		{"path as key", "", "/" + long, nil, 400, "request key longer", "", nil},
		{"endpoint under a per-endpoint quota", KeyEndpoint, "/c/1/r/1/" + long, nil, 400, "endpoint longer", "1", nil},
		{"long endpoint without one", "", "/c/1/r/1/" + long, nil, 200, "200 OK", "1", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := Config{}
				if tt.key != "" {
					cfg = Config{Quota: &Quota{Limits: []Limit{{Limit: 100, Key: tt.key}}}, Phases: []Phase{{Respond: Respond{Kind: RespondQuota}}}}
				}
				h := newHarness(t, cfg, 1)
				for i := range 2 {
					w := h.do("GET", tt.path, tt.hdr...)
					if w.Code != tt.status || !strings.Contains(w.Body.String(), tt.bodyHas) {
						t.Errorf("request %d: %d %q; want %d with %q", i, w.Code, w.Body.String(), tt.status, tt.bodyHas)
					}
				}
				as := h.attempts()
				for i, a := range as {
					if len(a.Client) > MaxIDBytes || len(a.Key) > MaxIDBytes || len(a.Path) > max(MaxIDBytes, len("/c/1/r/1/")+len(long)) {
						t.Errorf("record %d holds %d, %d, %d bytes of client, key, path; want <= %d", i, len(a.Client), len(a.Key), len(a.Path), MaxIDBytes)
					}
					if tt.recClnt != "" && a.Client != tt.recClnt {
						t.Errorf("record %d client = %q; want %q", i, a.Client, tt.recClnt)
					}
					if tt.status == 400 && (a.Status != 400 || a.Fault != "" || len(a.Path) > MaxIDBytes) {
						t.Errorf("record %d = status %d fault %q path of %d bytes; want 400, the path cut to %d", i, a.Status, a.Fault, len(a.Path), MaxIDBytes)
					}
					if a.Attempt != i+1 {
						t.Errorf("record %d attempt = %d; want %d (a retry of the same key)", i, a.Attempt, i+1)
					}
				}
				if tt.status == 400 && !strings.HasSuffix(as[0].Key, truncMarker) && len(as[0].Key) == MaxIDBytes {
					t.Errorf("cut key %q does not end in %q", as[0].Key, truncMarker)
				}
			})
		})
	}
}

func TestCapID(t *testing.T) {
	if got := capID("a", "/", "b"); got != "a/b" {
		t.Errorf("capID(a, /, b) = %q; want a/b", got)
	}
	long := strings.Repeat("é", MaxIDBytes) // 2 bytes each
	got := capID("c:", long)
	if len(got) > MaxIDBytes || !strings.HasPrefix(got, "c:éé") || !strings.HasSuffix(got, truncMarker) {
		t.Errorf("capID = %q (%d bytes); want c:é… cut to <= %d ending in %q", got, len(got), MaxIDBytes, truncMarker)
	}
	if body := strings.TrimSuffix(got, truncMarker); !strings.HasSuffix(body, "é") {
		t.Errorf("capID split a rune: %q", body)
	}
}

// TestKeyTablesBoundedInBytes fills the attempt counter and a per-client
// limiter with keys of MaxIDBytes, all live at once: each holds at most
// maxKeyBytes of key per generation, whatever the count.
func TestKeyTablesBoundedInBytes(t *testing.T) {
	var c attemptCounter
	c.cur = make(map[string]int32)
	lim, _ := NewMemoryLimiter(LimiterSpec{Limits: []Limit{{Limit: 1, Per: time.Hour, Key: KeyClient}}})
	m := lim.(*memLimiter)
	pad := strings.Repeat("k", MaxIDBytes-8)
	now := epoch2000
	n := 3 * maxKeyBytes / MaxIDBytes // 49,152 keys: far below maxKeys, 3× the byte bound
	for i := range n {
		k := fmt.Sprintf("%08d", i) + pad
		c.next(k)
		m.Take(context.Background(), oneKey(k), now)
	}
	held := func(ms ...map[string]int32) (b int) {
		for _, mm := range ms {
			for k := range mm {
				b += len(k)
			}
		}
		return b
	}
	if b := held(c.cur, c.prev); b > 2*maxKeyBytes || c.curBytes != held(c.cur) {
		t.Errorf("attempt counter holds %d bytes of key (counted %d); want <= %d", b, c.curBytes, 2*maxKeyBytes)
	}
	var lb int
	for k := range m.layers[0].keys {
		lb += len(k)
	}
	if lb > maxKeyBytes || lb != m.layers[0].bytes || lb == 0 {
		t.Errorf("limiter holds %d bytes of key (counted %d); want 0 < held <= %d", lb, m.layers[0].bytes, maxKeyBytes)
	}
	// Recent keys are still known: the latest is on its second attempt.
	last := fmt.Sprintf("%08d", n-1) + pad
	if got := c.next(last); got != 2 {
		t.Errorf("next(latest key) = %d; want 2", got)
	}
}

// hostileLoad sends n requests to base over conns keep-alive connections,
// each with a client id of idBytes (alternately in the path and in
// X-Client-Id, so both forms are exercised), and counts the statuses.
func hostileLoad(tb testing.TB, base string, n, conns, idBytes int) map[int]int {
	tb.Helper()
	tr := &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	var (
		mu    sync.Mutex
		codes = map[int]int{}
		wg    sync.WaitGroup
		next  = make(chan int)
	)
	for range conns {
		wg.Go(func() {
			for i := range next {
				id := strconv.Itoa(i) + strings.Repeat("x", idBytes-len(strconv.Itoa(i)))
				var req *http.Request
				if i%2 == 0 {
					req, _ = http.NewRequest("GET", base+"/c/"+id+"/r/0", nil)
				} else {
					req, _ = http.NewRequest("GET", base+"/x", nil)
					req.Header.Set("X-Client-Id", id)
				}
				code := 0
				if resp, err := c.Do(req); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					code = resp.StatusCode
				}
				mu.Lock()
				codes[code]++
				mu.Unlock()
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return codes
}

// heapInUse is the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestHostileIDsKeepHeapBounded drives 5,000 requests with 60 KB client ids
// (1,000 under -race) over loopback into a recording server with a
// per-client quota: every one is answered 400, and the heap they leave
// behind stays under 4 MiB (their ids alone are 293 MiB).
func TestHostileIDsKeepHeapBounded(t *testing.T) {
	rec := timeline.NewRecorder(timeline.NewEncoder(io.Discard), 64)
	s, err := New(Config{Quota: &Quota{Limits: []Limit{{Limit: 10, Key: KeyClient}}}, Phases: []Phase{{Respond: Respond{Kind: RespondQuota}}}},
		Options{Recorder: rec})
	if err != nil {
		t.Fatal(err)
	}
	base := liveServer(t, s)
	n := 5000
	if testenv.RaceEnabled {
		n = 1000 // the race detector makes 300 MB of loopback take ~20 s
	}
	before := heapInUse()
	codes := hostileLoad(t, base, n, 8, 60<<10)
	if codes[400] != n {
		t.Errorf("statuses = %v; want %d × 400", codes, n)
	}
	after := heapInUse()
	retained := int64(after) - int64(before)
	t.Logf("heap retained after %d requests with 60 KB client ids: %d bytes", n, retained)
	if retained > 4<<20 {
		t.Errorf("heap grew by %d bytes; want < 4 MiB", retained)
	}
	// Path ids and header ids are distinct keys (cut; a header id keys
	// "CLIENT GET /x").
	if keys := len(s.attempts.cur) + len(s.attempts.prev); keys != n {
		t.Errorf("attempt counter keys = %d; want %d", keys, n)
	}
	s.Shutdown(context.Background())
	rec.Close()
}

// BenchmarkHostileIDs sends 5,000 requests with 60 KB client ids per
// iteration and reports the heap retained and the process's peak RSS. With
// RETRYLAB_SERVE_ADDR=127.0.0.1:PORT it loads a running `retrylab serve`
// instead (its RSS is then read from /proc/PID/status by the caller).
func BenchmarkHostileIDs(b *testing.B) {
	base := ""
	if addr := os.Getenv("RETRYLAB_SERVE_ADDR"); addr != "" {
		host, _, err := net.SplitHostPort(addr)
		if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
			b.Fatalf("RETRYLAB_SERVE_ADDR %q: want a loopback host:port", addr)
		}
		base = "http://" + addr
	} else {
		s, err := New(Config{Quota: &Quota{Limits: []Limit{{Limit: 10, Key: KeyClient}}}, Phases: []Phase{{Respond: Respond{Kind: RespondQuota}}}}, Options{})
		if err != nil {
			b.Fatal(err)
		}
		base = liveServer(b, s)
	}
	external := os.Getenv("RETRYLAB_SERVE_ADDR") != ""
	before := heapInUse()
	for b.Loop() {
		codes := hostileLoad(b, base, 5000, 8, 60<<10)
		switch {
		case codes[0] > 0:
			b.Fatalf("statuses = %v (0: transport errors); want none failed", codes)
		case external:
			b.Logf("statuses from %s: %v", base, codes) // any build of serve, for a before/after
		case codes[400] != 5000:
			b.Fatalf("statuses = %v; want 5000 × 400", codes)
		}
	}
	b.ReportMetric(float64(int64(heapInUse())-int64(before)), "retained-B")
	b.ReportMetric(float64(procstat.PeakRSS())/(1<<20), "peak-RSS-MiB")
}

// BenchmarkKeyTablesFull fills the attempt counter (both generations) and a
// per-client token-bucket limiter to their bounds with live keys of each
// length, and reports the heap each holds: the worst case of the tables'
// memory whatever the traffic.
func BenchmarkKeyTablesFull(b *testing.B) {
	for _, klen := range []int{16, 64, MaxIDBytes} {
		b.Run(strconv.Itoa(klen)+"B-keys", func(b *testing.B) {
			mk := func(i int) string { return fmt.Sprintf("%08d", i) + strings.Repeat("k", klen-8) }
			per := min(maxKeys, maxKeyBytes/klen) // keys per generation
			var counter, limiter float64
			for b.Loop() {
				before := heapInUse()
				var c attemptCounter
				c.cur = make(map[string]int32)
				for i := range 2*per - 1 {
					c.next(mk(i))
				}
				mid := heapInUse()
				lim, _ := NewMemoryLimiter(LimiterSpec{Limits: []Limit{{Limit: 1, Key: KeyClient}}})
				for i := range per - 1 {
					lim.Take(context.Background(), oneKey(mk(i)), epoch2000)
				}
				after := heapInUse()
				counter, limiter = float64(mid-before)/(1<<20), float64(after-mid)/(1<<20)
				runtime.KeepAlive(&c)
				runtime.KeepAlive(lim)
			}
			b.ReportMetric(counter, "counter-MiB")
			b.ReportMetric(limiter, "limiter-MiB")
		})
	}
}
