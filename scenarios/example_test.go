package scenarios_test

import (
	"fmt"

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

func ExampleBuiltin() {
	sc, err := scenarios.Builtin("outage-bare")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(sc.Name, sc.Fleet.Clients, sc.Fleet.Start, sc.Server.Phases[0].RetryAfter.Form)
	// Output: outage-bare 300 burst none
}
