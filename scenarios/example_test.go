package scenarios_test

import (
	"context"
	"fmt"
	"io"

	"github.com/retrylab/retrylab/scenarios"
)

// A scenario file with a mistake: the error names the file, line, column
// and key.
func ExampleParse() {
	_, err := scenarios.Parse("ci.yaml", []byte(`
name: ci
server:
  phases:
    - name: outage
      for: -5s
      respond: {status: 503}
`))
	fmt.Println(err)
	// Output: ci.yaml:6:12: server.phases[0].for: negative duration "-5s"
}

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
	sum, err := scenarios.Run(context.Background(), sc, scenarios.RunOptions{Seed: 1, Timeline: io.Discard})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%d of %d ok, %d throttled first\n", sum.Results["ok"], sum.Planned, sum.Throttled429)
	// Output: 10 of 10 ok, 5 throttled first
}

func ExampleBuiltin() {
	sc, err := scenarios.Builtin("outage-bare")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(sc.Name, sc.Fleet.Clients, sc.Fleet.Start, sc.Server.Phases[0].RetryAfter.Form)
	// Output: outage-bare 300 burst none
}
