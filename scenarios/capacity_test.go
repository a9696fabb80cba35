package scenarios

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/retrylab/retrylab/stubserver"
)

// TestReadmeCapacityExample: the capacity example of docs/scenarios.md
// (the scenario reference, moved out of the README) parses into
// the capacity and the trigger it describes.
func TestReadmeCapacityExample(t *testing.T) {
	readme, err := os.ReadFile("../docs/scenarios.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Capacity: workers, a queue, service time")
	if !ok {
		t.Fatal("docs/scenarios.md has no capacity section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	_, block, ok := strings.Cut(section, "```yaml\n")
	if !ok {
		t.Fatal("capacity section has no yaml block")
	}
	block, _, _ = strings.Cut(block, "```")
	sc, err := Parse("docs/scenarios.md", []byte(block))
	if err != nil {
		t.Fatal(err)
	}
	want := stubserver.Capacity{Concurrency: 50, Queue: 100, Service: 20 * time.Millisecond, Dist: "exponential", Discipline: "lifo", CancelOnDisconnect: true}
	if k := sc.Server.Capacity; k == nil || *k != want {
		t.Errorf("capacity %+v; want %+v", k, want)
	}
	if ps := sc.Server.Phases; len(ps) != 3 || ps[1].Capacity != 0.3 {
		t.Errorf("phases %+v; want the trigger at 30%%", ps)
	}
}
