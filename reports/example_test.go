package reports_test

import (
	"bytes"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/retrylab/retrylab/analyzer"
	"github.com/retrylab/retrylab/reports"
	"github.com/retrylab/retrylab/timeline"
)

// tinyTimeline is a run of one client: a 503 with Retry-After, a retry that
// waited as asked, a 200.
func tinyTimeline() []byte {
	var buf bytes.Buffer
	enc := timeline.NewEncoder(&buf)
	enc.EncodeMeta(&timeline.Meta{
		Format: timeline.Format, Recorder: "run", Scenario: "outage-date", Subject: "retrylab", Scheduled: 1,
		Policy: &timeline.Policy{Base: 100e6, Cap: 5e9, MaxAttempts: 5, Budget: 20e9, Jitter: "full"},
		Phases: []timeline.Phase{{Name: "outage", Start: 0, End: 1e9, Respond: "status 503"}, {Name: "recovered", Start: 1e9, Respond: "ok"}},
	})
	enc.EncodeAttempt(&timeline.Attempt{Client: "0", Key: "0/0", Attempt: 1, Method: "GET", Path: "/c/0/r/0",
		At: 0, Done: 2e6, Status: 503, RetryAfter: "1", NotBefore: 1e9, HasNotBefore: true})
	enc.EncodeAttempt(&timeline.Attempt{Client: "0", Key: "0/0", Attempt: 2, Method: "GET", Path: "/c/0/r/0",
		At: 1001e6, Done: 1003e6, Status: 200})
	enc.EncodeOutcome(&timeline.Outcome{Client: "0", Key: "0/0", Start: 0, End: 1004e6, Result: "ok", Status: 200, Attempts: 2})
	enc.EncodeEnd(&timeline.End{At: 1004e6, Reason: timeline.EndCompleted})
	enc.Flush()
	return buf.Bytes()
}

// Write a report from a timeline and its verdict: report.html and the plots
// beside it.
func ExampleWriteFrom() {
	data := tinyTimeline()
	v, err := analyzer.Analyze(bytes.NewReader(data), analyzer.Options{})
	if err != nil {
		log.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "report")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	rep, err := reports.WriteFrom(dir, bytes.NewReader(data), v, reports.Options{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(filepath.Base(rep.HTML))
	for _, p := range rep.Plots {
		if p.PNG != "" {
			fmt.Printf("%s: %s, %s\n", p.Name, p.PNG, p.SVG)
		} else {
			fmt.Printf("%s: not drawn: %s\n", p.Name, p.Note)
		}
	}
	fmt.Printf("%d attempts, %d early\n", rep.Stats.Attempts, rep.Stats.EarlyRetries)
	// Output:
	// report.html
	// attempts: attempts.png, attempts.svg
	// raster: raster.png, raster.svg
	// retry-after: retry-after.png, retry-after.svg
	// backoff: not drawn: No retry was paced by the client's own backoff (every retry followed a usable Retry-After, or there were no retries).
	// completion: completion.png, completion.svg
	// 2 attempts, 0 early
}

// Compare two subjects' runs of one scenario: the ranking and
// compare.html with the key-figure plot.
func ExampleCompare() {
	data := tinyTimeline()
	v, err := analyzer.Analyze(bytes.NewReader(data), analyzer.Options{})
	if err != nil {
		log.Fatal(err)
	}
	failed := *v
	failed.Pass = false
	dir, err := os.MkdirTemp("", "compare")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	c, err := reports.Compare(dir, []reports.CompareEntry{
		{Subject: "exp-no-jitter", Verdict: &failed},
		{Subject: "retrylab", Verdict: v},
	}, reports.CompareOptions{})
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range c.Ranking {
		fmt.Println(r.Rank, r.Subject, r.Pass)
	}
	fmt.Println(filepath.Base(c.HTML), c.Plot.PNG, c.Plot.SVG)
	// Output:
	// 1 retrylab true
	// 2 exp-no-jitter false
	// compare.html compare.png compare.svg
}
