package modules

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readmeGoMod returns the go.mod the README shows for a module of one's
// own that uses retrylabtest (the block after its marker).
func readmeGoMod(t *testing.T) string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := bytes.Cut(readme, []byte("<!-- retrylabtest-gomod"))
	if !ok {
		t.Fatal("README.md has no retrylabtest-gomod marker")
	}
	_, block, ok := bytes.Cut(after, []byte("```gomod\n"))
	if !ok {
		t.Fatal("README.md: no ```gomod block after the retrylabtest-gomod marker")
	}
	block, _, _ = bytes.Cut(block, []byte("```"))
	return string(block)
}

// readmeGate returns the go test gate the README shows (the Go block
// that opens its "Gating CI inside `go test`" section).
func readmeGate(t *testing.T) string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := bytes.Cut(readme, []byte("## Gating CI inside `go test`\n\n```go\n"))
	if !ok {
		t.Fatal("README.md: no ```go block opening the section \"Gating CI inside `go test`\"")
	}
	block, _, _ := bytes.Cut(after, []byte("```"))
	return string(block)
}

// TestRetrylabtestFromAnotherModule builds and runs, offline and outside
// the workspace, a throwaway module with exactly the go.mod the README
// shows (its ../retrylab the repository) and a test that gates a client
// with retrylabtest.Run, through the README's steps (go mod tidy, go
// test): the README's two replace lines are all a module needs while the
// root module and the client are unreleased. The README's gate is
// compiled with it (not run: TestGate is its smaller twin). The module
// cache must hold the root module's requirements (`go mod download` at
// the root); go.sum is the root's and the client's.
func TestRetrylabtestFromAnotherModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the harness in a module of its own")
	}
	root := repoRoot(t)
	gomod := readmeGoMod(t)
	if n := strings.Count(gomod, "=> ../retrylab"); n != 2 {
		t.Fatalf("the README's go.mod replaces %d modules with ../retrylab…; want 2 (the root and the client):\n%s", n, gomod)
	}
	var sums []byte
	for _, d := range []string{root, filepath.Join(root, "client")} {
		b, err := os.ReadFile(filepath.Join(d, "go.sum"))
		if err != nil {
			t.Fatal(err)
		}
		sums = append(sums, b...)
	}
	dir := filepath.Join(t.TempDir(), "myclient")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"go.mod": strings.ReplaceAll(gomod, "../retrylab", root),
		"go.sum": string(sums),
		"gate_test.go": `package myclient

import (
	"testing"

	"github.com/retrylab/retrylab/retrylabtest"
)

func TestGate(t *testing.T) {
	res := retrylabtest.Run(t, retrylabtest.Builtin("outage-delta"), retrylabtest.Registered("retrylab"), retrylabtest.WithClients(10))
	res.AssertPass(t)
	t.Logf("verdict %s, %d attempts", res.Verdict.Status, res.Verdict.Figures.Attempts)
}

// The README's gate, as it shows it.
` + readmeGate(t),
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"GOWORK=off", "GOFLAGS=-mod=mod -buildvcs=false", "GOPROXY=off", "GOTOOLCHAIN=local"}
	// The README's steps: go mod tidy, then go test.
	goCmd(t, dir, env, "mod", "tidy")
	if tidied, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil {
		t.Logf("go.mod after go mod tidy:\n%s", tidied)
	}
	out := goCmd(t, dir, env, "test", "-count=1", "-v", "-run", "TestGate", ".")
	if !strings.Contains(out, "--- PASS: TestGate") || !strings.Contains(out, "verdict pass") {
		t.Errorf("go test in a module of its own:\n%s\nwant TestGate to pass with a PASS verdict", out)
	}
	// Nothing of the subjects' third-party retry libraries was linked.
	list := goCmd(t, dir, env, "list", "-deps", "-test", ".")
	if found := thirdPartyIn(strings.Fields(list)); len(found) > 0 {
		t.Errorf("a module using retrylabtest links %v", found)
	}
}
