package runner_test

import (
	"context"
	"fmt"
	"io"

	"github.com/retrylab/retrylab/runner"
	"github.com/retrylab/retrylab/scenarios"
)

// Run a scenario in real time against the in-process stub on loopback and
// read the summary.
func ExampleRun() {
	sc, err := scenarios.Parse("example.yaml", []byte(`
duration: 10s
server:
  phases:
    - {name: throttled, for: 1s, respond: {status: 429}, retry_after: {form: delta, value: 1}}
    - {name: fine, respond: ok}
fleet: {clients: 5, requests: 2}
subject: {name: retrylab, policy: {max_attempts: 4}}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	sum, err := runner.Run(context.Background(), sc, runner.RunOptions{Seed: 1, Timeline: io.Discard})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%d of %d ok, %d throttled first\n", sum.Results["ok"], sum.Planned, sum.Throttled429)
	// Output: 10 of 10 ok, 5 throttled first
}
