package reports

import (
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/retrylab/retrylab/timeline"
)

// synth describes a synthetic run: an outage answered 503 with Retry-After
// until outageEnd, then a quota answering 429 (sometimes with an unusable
// Retry-After, so the clients back off on their own), a few faults and a
// few 404s. Some clients misbehave on purpose: every 7th ignores
// Retry-After, every 11th overshoots its backoff bound.
type synth struct {
	clients, requests int
	seed              uint64
	stride            time.Duration // between client starts
	wellBehaved       bool          // no client misbehaves
}

const (
	synthOutageEnd = 2 * time.Second
	synthBase      = 100 * time.Millisecond
	synthCap       = 1600 * time.Millisecond
	synthBudget    = 6 * time.Second
	synthMax       = 5
)

func (s synth) meta() *timeline.Meta {
	return &timeline.Meta{
		Format:      timeline.Format,
		Tool:        "retrylab test",
		Recorder:    "run",
		Scenario:    "synthetic-outage",
		Description: "A synthetic outage: 503 with Retry-After until 2s, then a quota.",
		Subject:     "synthetic",
		Summary:     "exponential backoff, full jitter, honours Retry-After (mostly)",
		Policy:      &timeline.Policy{Base: int64(synthBase), Cap: int64(synthCap), MaxAttempts: synthMax, Budget: int64(synthBudget), Jitter: "full"},
		Seed:        int64(s.seed),
		Start:       time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Duration:    int64(20 * time.Second),
		Phases: []timeline.Phase{
			{Name: "outage", Start: 0, End: int64(synthOutageEnd), Respond: "status 503", RetryAfter: "date phase-end"},
			{Name: "recovered", Start: int64(synthOutageEnd), Respond: "quota", RetryAfter: "delta limiter"},
		},
		Fleet: &timeline.Fleet{Clients: s.clients, Requests: s.requests, Start: "ramp 1s", Think: int64(50 * time.Millisecond), Method: "GET", Timeout: int64(30 * time.Second)},
		Quota: &timeline.Quota{Algorithm: "token-bucket", Rate: 100, Burst: 20, Key: "global"},
	}
}

type synthEvent struct {
	at  int64 // write order
	att *timeline.Attempt
	out *timeline.Outcome
}

// write writes the synthetic timeline to w and returns the number of
// attempts.
func (s synth) write(w io.Writer) (int, error) {
	rng := rand.New(rand.NewPCG(s.seed, 7))
	var evs []synthEvent
	stride := s.stride
	if stride == 0 {
		stride = time.Second / time.Duration(max(1, s.clients))
	}
	for c := 0; c < s.clients; c++ {
		client := strconv.Itoa(c)
		t := int64(time.Duration(c) * stride)
		for r := 0; r < s.requests; r++ {
			key := client + "/" + strconv.Itoa(r)
			start := t
			result, status := timeline.ResultGaveUp, 0
			n := 0
			for {
				n++
				a := &timeline.Attempt{Client: client, Key: key, Attempt: n, Method: "GET", Path: "/c/" + key, At: t}
				lat := int64(2*time.Millisecond) + rng.Int64N(int64(3*time.Millisecond))
				a.Done = t + lat
				var wait int64
				switch {
				case t < int64(synthOutageEnd):
					a.Status, a.Phase, a.RetryAfter = 503, "outage", "Fri, 02 Jan 2026 03:04:07 GMT"
					a.NotBefore, a.HasNotBefore = int64(synthOutageEnd), true
					wait = a.NotBefore - a.Done + rng.Int64N(int64(20*time.Millisecond))
					if c%7 == 0 && !s.wellBehaved {
						wait = int64(50 * time.Millisecond) // ignores Retry-After
					}
				default:
					a.Phase = "recovered"
					switch x := rng.IntN(100); {
					case x < 55:
						a.Status = 200
					case x < 70:
						a.Status, a.RetryAfter = 429, "1"
						a.NotBefore, a.HasNotBefore = a.Done+int64(time.Second), true
						wait = a.NotBefore - a.Done + rng.Int64N(int64(50*time.Millisecond))
						if c%7 == 0 && !s.wellBehaved {
							wait = rng.Int64N(int64(time.Second))
						}
					case x < 90:
						a.Status, a.RetryAfter = 429, "soon" // unusable: the client backs off
					case x < 95:
						a.Fault = timeline.FaultReset
					default:
						a.Status = 404
					}
					if !a.HasNotBefore {
						bound := min(int64(synthCap), int64(synthBase)<<(n-1))
						wait = rng.Int64N(bound + 1)
						if c%11 == 0 && !s.wellBehaved {
							wait = bound + bound/2
						}
					}
				}
				evs = append(evs, synthEvent{at: a.Done, att: a})
				if a.Status == 200 {
					result, status = timeline.ResultOK, 200
					t = a.Done
					break
				}
				if a.Status == 404 {
					result, status = timeline.ResultNonRetryable, 404
					t = a.Done
					break
				}
				if n >= synthMax {
					result, status = timeline.ResultGaveUp, a.Status
					t = a.Done
					break
				}
				if a.Done+wait-start > int64(synthBudget) {
					result, status = timeline.ResultBudget, a.Status
					t = a.Done
					break
				}
				t = a.Done + wait
			}
			o := &timeline.Outcome{Client: client, Key: key, Scheduled: start, Start: start, End: t + int64(time.Millisecond), Result: result, Status: status, Attempts: n}
			evs = append(evs, synthEvent{at: o.End, out: o})
			t = o.End + int64(50*time.Millisecond)
		}
	}
	slices.SortStableFunc(evs, func(a, b synthEvent) int {
		switch {
		case a.at < b.at:
			return -1
		case a.at > b.at:
			return 1
		}
		return 0
	})
	enc := timeline.NewEncoder(w)
	if err := enc.EncodeMeta(s.meta()); err != nil {
		return 0, err
	}
	attempts := 0
	for _, e := range evs {
		var err error
		if e.att != nil {
			attempts++
			err = enc.EncodeAttempt(e.att)
		} else {
			err = enc.EncodeOutcome(e.out)
		}
		if err != nil {
			return 0, err
		}
	}
	return attempts, enc.Flush()
}

// synthFile writes the synthetic timeline to a file in a temporary
// directory and returns its path.
func synthFile(t testing.TB, s synth) (string, int) {
	t.Helper()
	path := t.TempDir() + "/timeline.ndjson"
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	n, err := s.write(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path, n
}
