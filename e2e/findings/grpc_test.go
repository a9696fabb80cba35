package findings

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/retrylab/retrylab/analyzer"
	"github.com/retrylab/retrylab/internal/doccheck"
	"github.com/retrylab/retrylab/internal/testenv"
	"github.com/retrylab/retrylab/retrylabtest"
	_ "github.com/retrylab/retrylab/subjects/grpcsubjects" // the gRPC clients compared
)

var writeGRPC = flag.Bool("write-grpc", false, "rewrite docs/libraries.md's gRPC section from the runs instead of comparing it")

// grpcMarker starts docs/libraries.md's gRPC section, which
// TestGRPCLibraries makes (TestLibraries compares what comes before it).
const grpcMarker = "## gRPC clients"

// regenerateGRPC is the command that rewrites the gRPC section.
const regenerateGRPC = "go test ./e2e/findings -run TestGRPCLibraries -count=1 -args -write-grpc"

// grpcLibraries are the gRPC subjects judged: the reference interceptor
// first, then grpc-go's configurations and go-grpc-middleware's retry.
var grpcLibraries = []string{"grpcretry", "grpc-default", "grpc-retrypolicy", "grpc-throttling", "grpc-hedging", "grpc-middleware", "grpc-middleware-backoff"}

// grpcScenarios are the gRPC built-ins they are run through.
var grpcScenarios = []string{"grpc-outage", "grpc-quota-pushback", "grpc-pushback-refusal", "grpc-quota-retryinfo", "grpc-non-retryable", "grpc-metastable", "grpc-metastable-open"}

// grpcCauses say, from the libraries' source, why a check failed:
// subject/scenario/check. One no run bears out fails the test.
var grpcCauses = map[string]string{
	"grpc-default/grpc-outage/give-up":                                "without a retryPolicy in its service config grpc-go retries only transparently (an RPC that never left the client): every UNAVAILABLE ends the call.",
	"grpc-hedging/grpc-outage/give-up":                                "grpc-go v1.85 does not implement hedging: its service config parser ignores `hedgingPolicy` (service_config.go has no field for it), so the channel behaves as grpc-default, with no retries.",
	"grpc-middleware/grpc-outage/give-up":                             "`retry.UnaryClientInterceptor()` defaults to `WithMax(0)`, \"disabled\" (interceptors/retry/options.go): it calls once.",
	"grpc-retrypolicy/grpc-outage/give-up":                            "A6 caps `maxAttempts` at 5; with `initialBackoff` 0.1 s ×2 under full jitter the 4 retries are spent within about 1.5 s of an 8 s outage.",
	"grpc-throttling/grpc-outage/give-up":                             "as grpc-retrypolicy (5 attempts), and retryThrottling's tokens (10, a failure costs 1, retries stop at 5) end a channel's retries after its first 5 failures.",
	"grpc-middleware-backoff/grpc-outage/give-up":                     "`WithMax(5)` is 5 attempts; `BackoffExponentialWithJitter(100ms, 0.1)` waits 0.1, 0.2, 0.4, 0.8 s (±10 %): about 1.5 s of an 8 s outage.",
	"grpc-middleware-backoff/grpc-outage/waves":                       "±10 % jitter around one exponential schedule: the fleet that started together retries together.",
	"grpc-middleware-backoff/grpc-pushback-refusal/retry-after":       "the interceptor does not read grpc-retry-pushback-ms: it retries after a negative or malformed one, which gRPC A6 reads as \"do not retry\" (grpc-go's retryPolicy stops there).",
	"grpc-middleware-backoff/grpc-quota-pushback/retry-after":         "the interceptor reads neither the grpc-retry-pushback-ms trailer nor RetryInfo: it waits its own backoff, shorter than the quota's wait.",
	"grpc-middleware-backoff/grpc-quota-retryinfo/retry-after":        "the interceptor reads neither the grpc-retry-pushback-ms trailer nor RetryInfo: it waits its own backoff, shorter than the quota's wait.",
	"grpc-retrypolicy/grpc-quota-retryinfo/retry-after":               "grpc-go honours the pushback trailer (stream.go, `shouldRetry`) but never reads `google.rpc.RetryInfo` in the status details: it retries on its own backoff, before the quota's retry_delay.",
	"grpc-throttling/grpc-quota-retryinfo/retry-after":                "as grpc-retrypolicy: RetryInfo is not read.",
	"grpc-throttling/grpc-quota-pushback/give-up":                     "each RESOURCE_EXHAUSTED costs the channel a token and a success earns back 0.1: a client whose calls meet the quota a few times in a row is below maxTokens/2 and its next call is not retried at all.",
	"grpc-throttling/grpc-quota-retryinfo/give-up":                    "each RESOURCE_EXHAUSTED costs the channel a token and a success earns back 0.1: a client whose calls meet the quota a few times in a row is below maxTokens/2 and its next call is not retried at all.",
	"grpc-default/grpc-quota-pushback/give-up":                        "no retries (no retryPolicy): a call that meets the quota fails, though the quota has a token again within milliseconds.",
	"grpc-default/grpc-quota-retryinfo/give-up":                       "no retries (no retryPolicy): a call that meets the quota fails, though the quota has a token again within milliseconds.",
	"grpc-hedging/grpc-quota-pushback/give-up":                        "hedgingPolicy is ignored: no retries.",
	"grpc-hedging/grpc-quota-retryinfo/give-up":                       "hedgingPolicy is ignored: no retries.",
	"grpc-middleware/grpc-quota-pushback/give-up":                     "`WithMax(0)` by default: no retries.",
	"grpc-middleware/grpc-quota-retryinfo/give-up":                    "`WithMax(0)` by default: no retries.",
	"grpc-default/grpc-non-retryable/give-up":                         "the 4 % UNAVAILABLE that one retry would fix are not retried.",
	"grpc-middleware-backoff/grpc-metastable/load-amplification":      "with the application's 30 ms timeout as `WithPerRetryTimeout`, the interceptor retries a timed-out attempt (it retries context errors when a per-retry timeout is set), up to 5 attempts, with no retry budget: the overload's timeouts multiply the load.",
	"grpc-retrypolicy/grpc-metastable-open/recovery":                  "grpc-go has no per-attempt timeout, but the proxy's timeout plays one: each UNAVAILABLE it answers is retried (A6, up to 5 attempts within the 2 s deadline) while the server still serves the call, so after the trigger the attempts stay above capacity and the queue full (metastable). With retryThrottling the same channel stops (grpc-throttling's ✓).",
	"grpc-retrypolicy/grpc-metastable-open/load-amplification":        "each call makes up to 5 attempts, and every one the proxy times out is served anyway: the server works several times per call.",
	"grpc-retrypolicy/grpc-metastable-open/wasted-work":               "the attempts the proxy gave up on are served for nobody.",
	"grpc-middleware-backoff/grpc-metastable-open/recovery":           "`WithMax(5)` with no retry budget retries every UNAVAILABLE the proxy answers: the retries keep the queue full after the trigger.",
	"grpc-middleware-backoff/grpc-metastable-open/load-amplification": "up to 5 attempts a call, each served by the server whether the proxy waited for it or not.",
	"grpc-middleware-backoff/grpc-metastable-open/wasted-work":        "the attempts the proxy gave up on are served for nobody.",
	"grpc-hedging/grpc-non-retryable/give-up":                         "the 4 % UNAVAILABLE that one retry would fix are not retried.",
	"grpc-middleware/grpc-non-retryable/give-up":                      "the 4 % UNAVAILABLE that one retry would fix are not retried.",
}

// TestGRPCLibraries runs the gRPC clients through the gRPC built-ins in
// virtual time, seeds 1-3, and compares docs/libraries.md's gRPC section
// with what the runs make (rows of clients that draw jitter from a
// global source are not compared: grpc-go's backoff does). -short and
// -race play none: the cells take minutes; `make matrix` runs it.
func TestGRPCLibraries(t *testing.T) {
	if testing.Short() || testenv.RaceEnabled {
		t.Skip("the gRPC findings run in make matrix (without -short and -race)")
	}
	var mu sync.Mutex
	failed := map[[2]string]map[string][]int64{} // subject, scenario → check → seeds
	outcomes := map[[2]string]map[string]int64{}
	t.Run("runs", func(t *testing.T) {
		for _, sc := range grpcScenarios {
			for _, subj := range grpcLibraries {
				for _, seed := range seeds {
					t.Run(fmt.Sprintf("%s/%s/seed%d", sc, subj, seed), func(t *testing.T) {
						t.Parallel()
						res := retrylabtest.Run(t, retrylabtest.Builtin(sc), retrylabtest.Registered(subj), retrylabtest.WithSeed(seed))
						mu.Lock()
						defer mu.Unlock()
						k := [2]string{subj, sc}
						if failed[k] == nil {
							failed[k] = map[string][]int64{}
						}
						for _, id := range res.Failed() {
							failed[k][id] = append(failed[k][id], seed)
						}
						if seed == seeds[0] {
							outcomes[k] = res.Verdict.Figures.Results
						}
					})
				}
			}
		}
	})
	if t.Failed() {
		return
	}
	for key := range grpcCauses {
		p := strings.Split(key, "/")
		if len(failed[[2]string{p[0], p[1]}][p[2]]) == 0 && replayable(p[0]) {
			t.Errorf("grpcCauses[%q] explains a failure no run (seeds %v) shows: update or remove it", key, seeds)
		}
	}
	for _, sc := range grpcScenarios {
		if f := failed[[2]string{"grpcretry", sc}]; len(f) > 0 {
			t.Errorf("the reference interceptor fails %s: %v", sc, f)
		}
	}
	section := grpcSection(failed, outcomes)
	old, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	head, _, _ := strings.Cut(string(old), grpcMarker)
	if *writeGRPC {
		if err := os.WriteFile(docPath, []byte(head+section), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	_, was, _ := strings.Cut(string(old), grpcMarker)
	if a, b := grpcStable(grpcMarker+was), grpcStable(section); a != b {
		t.Errorf("%s's gRPC section is stale: %s\nregenerate it with\n\t%s", docPath, doccheck.FirstDiff(a, b), regenerateGRPC)
	}
}

// grpcSection is the gRPC section of docs/libraries.md.
func grpcSection(failed map[[2]string]map[string][]int64, outcomes map[[2]string]map[string]int64) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\n\n", grpcMarker)
	fmt.Fprintf(&b, "Each gRPC client runs through the gRPC built-ins (`server.protocol: grpc`, see [gRPC](grpc.md)) in virtual time, seeds %s, judged by the scenario's own checks. `grpcretry` (client/grpcretry) is the reference. Regenerate with\n\n    %s\n\n", seedList(seeds), regenerateGRPC)
	fmt.Fprintf(&b, "A cell is ✓ when every seed passed, else the checks that failed (with the seeds, when not all). grpc-go draws its backoff from a global source, so its rows (grpc-retrypolicy, grpc-throttling) and the middleware's with backoff are not compared when the test checks this section.\n\n")
	fmt.Fprintf(&b, "| client | %s |\n|---|%s\n", strings.Join(quoted(grpcScenarios), " | "), strings.Repeat("---|", len(grpcScenarios)))
	for _, subj := range grpcLibraries {
		cells := []string{"`" + subj + "`"}
		for _, sc := range grpcScenarios {
			cells = append(cells, grpcCell(failed[[2]string{subj, sc}]))
		}
		fmt.Fprintf(&b, "| %s |\n", strings.Join(cells, " | "))
	}
	fmt.Fprintf(&b, "\n### Why, from the source\n\n")
	for _, subj := range grpcLibraries {
		for _, sc := range grpcScenarios {
			f := failed[[2]string{subj, sc}]
			for _, id := range sortedKeys(f) {
				if cause, ok := grpcCauses[subj+"/"+sc+"/"+id]; ok {
					fmt.Fprintf(&b, "- `%s` × %s, `%s`: %s\n", subj, sc, id, cause)
				}
			}
		}
	}
	fmt.Fprintf(&b, "\n### Outcomes (seed %d)\n\nThe counts move by a few between runs (the calls race grpc-go's own goroutines, which the virtual clock does not order), so the test compares the verdicts above, not these.\n\n| client | %s |\n|---|%s\n", seeds[0], strings.Join(quoted(grpcScenarios), " | "), strings.Repeat("---|", len(grpcScenarios)))
	for _, subj := range grpcLibraries {
		cells := []string{"`" + subj + "`"}
		for _, sc := range grpcScenarios {
			cells = append(cells, resultsText(outcomes[[2]string{subj, sc}]))
		}
		fmt.Fprintf(&b, "| %s |\n", strings.Join(cells, " | "))
	}
	return b.String()
}

func grpcCell(f map[string][]int64) string {
	if len(f) == 0 {
		return "✓"
	}
	var parts []string
	for _, id := range sortedKeys(f) {
		s := "`" + id + "`"
		if n := len(f[id]); n < len(seeds) {
			s += " (" + seedList(f[id]) + ")"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

// grpcStable is a gRPC section without the rows of clients that are not
// replayable.
func grpcStable(s string) string {
	var out []string
	s, _, _ = strings.Cut(s, "\n### Outcomes") // counts that move by a few between runs
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		if rest, ok := strings.CutPrefix(line, "| `"); ok {
			name, _, _ := strings.Cut(rest, "`")
			if slices.Contains(grpcLibraries, name) && !replayable(name) {
				continue
			}
		}
		if rest, ok := strings.CutPrefix(line, "- `"); ok {
			name, _, _ := strings.Cut(rest, "`")
			if slices.Contains(grpcLibraries, name) && !replayable(name) {
				continue
			}
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

func quoted(names []string) []string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = "`" + n + "`"
	}
	return q
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

var _ = analyzer.StatusFail
