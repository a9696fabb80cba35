//go:build unix

package runner

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/retrylab/retrylab/internal/loghist"
	"github.com/retrylab/retrylab/scenarios"
	"github.com/retrylab/retrylab/stubserver"
	"github.com/retrylab/retrylab/subjects"
	"github.com/retrylab/retrylab/timeline"
)

// stampWhole is how exec outcomes were stamped before issue 33: every
// outcome of a process from its start (at time zero, past the barrier)
// to its exit. The baseline of BenchmarkExecOutcomes.
func stampWhole(r *runner, p *process, _ []keptLine, exited int64) [][]stamp {
	out := make([][]stamp, len(p.clients))
	for j := range p.clients {
		out[j] = make([]stamp, r.sc.Fleet.Requests)
		for seq := range out[j] {
			out[j][seq] = stamp{key: strconv.Itoa(p.clients[j]) + "/" + strconv.Itoa(seq), end: exited}
		}
	}
	return out
}

// BenchmarkExecOutcomes measures the runner's CPU per 1,000 result lines
// of an exec fleet (100 one-client processes × 10 requests, two attempts
// each), stamped per request against stamped per process as before
// (stampWhole), alternated in one run. Each variant does the route's work
// per line in this process: the stub answers each attempt (its handler,
// called directly) and records it, the line is parsed, the processes are
// judged and the outcomes encoded. On top of it, stamped:
//
//   - the stub's hook notes each attempt (requestStamps.add);
//   - the reader stamps each line (time.Now: once per read, here one
//     read per line, as a program that flushes each line is read);
//   - programOutcomes stamps each outcome from them (stampProcess).
//
// What both routes do besides (starting the processes, reading their
// pipes, net/http's own work on each request) is not counted, so the
// ratio overstates the stamps' share of a whole run.
//
//	go test -run '^$' -bench BenchmarkExecOutcomes -benchtime 1000x -count 5 ./runner
func BenchmarkExecOutcomes(b *testing.B) {
	const clients, requests = 100, 10
	sc := &scenarios.Scenario{Name: "bench", Duration: time.Minute,
		Fleet: scenarios.Fleet{Clients: clients, Requests: requests, Timeout: time.Second}}
	texts := make([][]string, clients) // each process's stdout
	for id := range clients {
		for seq := range requests {
			texts[id] = append(texts[id], fmt.Sprintf("ok /r/%d", seq))
		}
	}
	// One stub per variant, each recording to nowhere; the stamped one's
	// hook feeds the requestStamps of the pass in progress.
	var cur *requestStamps
	zero := time.Now() // time zero of the stubs and of every pass
	stub := func(hook func(*timeline.Attempt)) (*stubserver.Server, *timeline.Recorder) {
		rec := timeline.NewRecorder(timeline.NewEncoder(io.Discard), 4096)
		srv, err := stubserver.New(stubserver.Config{}, stubserver.Options{Start: zero, Recorder: rec, OnAttempt: hook})
		if err != nil {
			b.Fatal(err)
		}
		return srv, rec
	}
	plain, plainRec := stub(nil)
	hooked, hookedRec := stub(func(a *timeline.Attempt) { cur.add(a) })
	w := &nullWriter{h: http.Header{}}
	// once runs the route over the fleet's 1,000 lines and returns the
	// runner's CPU for it (the recorders' goroutines included).
	once := func(stamped bool) time.Duration {
		cpu0 := cpuTime()
		r := &runner{sc: sc, start: zero, rec: timeline.NewRecorder(timeline.NewEncoder(io.Discard), 64)}
		pf := &programFleet{prog: subjects.Program{Path: "bench"}, requests: requests, timeout: time.Second,
			clients: clients, procs: make([]*process, clients)}
		srv, stamp := plain, stampWhole
		if stamped {
			pf.stamps, pf.readerLag = newRequestStamps(clients, requests), loghist.New(latenessLayout)
			cur, srv, stamp = pf.stamps, hooked, pf.stampProcess
		}
		for id := range clients {
			p := &process{index: id, clients: []int{id}}
			for seq, text := range texts[id] {
				for range 2 {
					clear(w.h)
					srv.ServeHTTP(w, httptest.NewRequest(http.MethodGet, stubserver.RequestPath(id, seq), nil))
				}
				l, err := subjects.ParseProgramLine(text)
				if err != nil {
					b.Fatal(err)
				}
				if stamped {
					l.Read = time.Now()
				}
				p.lines = append(p.lines, l)
			}
			p.ended = time.Now()
			r.recordOutcomes(pf, p, false, stamp)
		}
		if err := r.rec.Close(); err != nil {
			b.Fatal(err)
		}
		if n := r.done.Load(); n != clients*requests || r.harness.Load() != 0 {
			b.Fatalf("%d outcomes, %d harness; want %d clean", n, r.harness.Load(), clients*requests)
		}
		if stamped && pf.readerLag.N() != clients*requests {
			b.Fatalf("%d lines' lag measured; want every line's (%d): the hook saw every answer", pf.readerLag.N(), clients*requests)
		}
		return cpuTime() - cpu0
	}
	var before, stamped time.Duration
	stampedFirst := false
	for b.Loop() {
		stampedFirst = !stampedFirst // alternate which goes first
		if stampedFirst {
			stamped += once(true)
		}
		before += once(false)
		if !stampedFirst {
			stamped += once(true)
		}
	}
	plainRec.Close()
	hookedRec.Close()
	b.ReportMetric(float64(before.Nanoseconds())/float64(b.N), "before-cpu-ns/1000lines")
	b.ReportMetric(float64(stamped.Nanoseconds())/float64(b.N), "stamped-cpu-ns/1000lines")
	b.ReportMetric(float64(stamped)/float64(before), "ratio")
	b.ReportMetric(0, "ns/op")
}
