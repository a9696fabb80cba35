package modules

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// repoRoot is the repository's root, two levels up from this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// goCmd runs the go command in dir with env added to the test's own, and
// returns its standard output; it fails the test on an error.
func goCmd(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s (in %s): %v\n%s", strings.Join(args, " "), dir, err, stderr.String())
	}
	return string(out)
}

// thirdParty are the module paths of the third-party retry libraries the
// CLI compares (subjects/thirdparty), that package itself, Prometheus,
// which only serve's /metrics exporter (stubserver/stubprom) needs, and
// go-redis, which only the stub's Redis quota backend
// (stubserver/stubredis) needs.
var thirdParty = []string{
	"github.com/prometheus/client_golang",
	"github.com/retrylab/retrylab/stubserver/stubprom",
	"github.com/redis/go-redis",
	"github.com/retrylab/retrylab/stubserver/stubredis",
	"github.com/hashicorp/go-retryablehttp",
	"github.com/cenkalti/backoff",
	"github.com/failsafe-go/failsafe-go",
	"github.com/go-resty/resty",
	"github.com/avast/retry-go",
	"github.com/sethvargo/go-retry",
	"github.com/retrylab/retrylab/subjects/thirdparty",
}

// deps returns the packages pkg depends on, itself included (go list -deps,
// in the workspace).
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	return strings.Fields(goCmd(t, repoRoot(t), nil, "list", "-deps", pkg))
}

// thirdPartyIn returns the packages of pkgs that belong to a third-party
// retry library (or are subjects/thirdparty).
func thirdPartyIn(pkgs []string) []string {
	var found []string
	for _, p := range pkgs {
		for _, m := range thirdParty {
			if p == m || strings.HasPrefix(p, m+"/") {
				found = append(found, p)
			}
		}
	}
	return found
}

// TestRetrylabtestDeps: importing retrylabtest links none of the
// third-party retry libraries (nor Prometheus, nor go-redis), while the CLI, which registers them, links
// every one (so the first half cannot pass because the list is wrong).
func TestRetrylabtestDeps(t *testing.T) {
	lib := deps(t, "./retrylabtest")
	if !slices.Contains(lib, "github.com/retrylab/retrylab/subjects") {
		t.Fatalf("go list -deps ./retrylabtest lacks the subjects package: %v", lib)
	}
	if found := thirdPartyIn(lib); len(found) > 0 {
		t.Errorf("go list -deps ./retrylabtest names third-party retry libraries, Prometheus or go-redis: %v", found)
	}
	cli := thirdPartyIn(deps(t, "./cmd/retrylab"))
	for _, m := range thirdParty {
		if !slices.ContainsFunc(cli, func(p string) bool { return p == m || strings.HasPrefix(p, m+"/") }) {
			t.Errorf("go list -deps ./cmd/retrylab lacks %s: the CLI must register every third-party subject, serve /metrics and keep quotas in Redis", m)
		}
	}
}

// clientGoLine is the newest go line a module importing only the client
// may be held to (client/go.mod's).
const clientGoLine = "1.25.0"

// TestClientModuleGraph builds, offline, a throwaway module that imports
// only the client (replace to the local client/ directory, no workspace)
// and asserts its module graph: the client and golang.org/x/time, nothing
// else, none of them asking for a go line newer than the client's. The
// module cache must already hold the client's golang.org/x/time (`make
// check` downloads it: cd client && GOWORK=off go mod download).
func TestClientModuleGraph(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module of its own, offline: make check")
	}
	root := repoRoot(t)
	clientDir := filepath.Join(root, "client")
	sum, err := os.ReadFile(filepath.Join(clientDir, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := map[string]string{
		"go.mod": "module example.com/clientuser\n\ngo " + clientGoLine + "\n\n" +
			"require github.com/retrylab/retrylab/client v0.1.0\n\n" +
			"replace github.com/retrylab/retrylab/client => " + clientDir + "\n",
		// The client's own checksums: nothing to ask a checksum database.
		"go.sum": string(sum),
		"main.go": `package main

import (
	"net/http"

	"github.com/retrylab/retrylab/client"
)

func main() {
	c := &http.Client{Transport: client.New(nil, client.Config{})}
	_ = c
}
`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"example.com/clientuser", "github.com/retrylab/retrylab/client", "golang.org/x/time"}
	if modules := buildOffline(t, dir, "importing only the client"); !slices.Equal(modules, want) {
		t.Errorf("modules in the graph = %v; want %v", modules, want)
	}
}

// TestClientRedisModuleGraph is TestClientModuleGraph for a module that
// imports the client and clientredis: go-redis and its own requirements
// join the graph, still at go lines no newer than the client's, and
// nothing of the harness (the root module, Prometheus) does. The module
// cache must hold clientredis's requirements (`make client-deps`).
func TestClientRedisModuleGraph(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module of its own on go-redis, offline: make check")
	}
	root := repoRoot(t)
	clientDir := filepath.Join(root, "client")
	redisDir := filepath.Join(clientDir, "clientredis")
	var sums []byte
	for _, d := range []string{clientDir, redisDir} {
		b, err := os.ReadFile(filepath.Join(d, "go.sum"))
		if err != nil {
			t.Fatal(err)
		}
		sums = append(sums, b...)
	}
	dir := t.TempDir()
	files := map[string]string{
		"go.mod": "module example.com/clientuser\n\ngo " + clientGoLine + "\n\n" +
			"require (\n\tgithub.com/retrylab/retrylab/client v0.1.0\n\tgithub.com/retrylab/retrylab/client/clientredis v0.1.0\n)\n\n" +
			"replace github.com/retrylab/retrylab/client => " + clientDir + "\n\n" +
			"replace github.com/retrylab/retrylab/client/clientredis => " + redisDir + "\n",
		"go.sum": string(sums),
		"main.go": `package main

import (
	"net/http"

	"github.com/redis/go-redis/v9"

	"github.com/retrylab/retrylab/client"
	"github.com/retrylab/retrylab/client/clientredis"
)

func main() {
	lim, err := clientredis.New(redis.NewClient(&redis.Options{}), clientredis.Options{Rate: 10})
	if err != nil {
		panic(err)
	}
	c := &http.Client{Transport: client.New(nil, client.Config{Limiter: lim})}
	_ = c
}
`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	modules := buildOffline(t, dir, "importing the client and clientredis")
	want := []string{
		"example.com/clientuser",
		"github.com/bsm/ginkgo/v2", "github.com/bsm/gomega", // go-redis's test requirements, go.mod only
		"github.com/cespare/xxhash/v2",
		"github.com/davecgh/go-spew", // go.uber.org/atomic's test requirements, go.mod only
		"github.com/klauspost/cpuid/v2",
		"github.com/pmezard/go-difflib",
		"github.com/redis/go-redis/v9",
		"github.com/retrylab/retrylab/client",
		"github.com/retrylab/retrylab/client/clientredis",
		"github.com/stretchr/testify",
		"github.com/zeebo/xxh3",
		"go.uber.org/atomic",
		"golang.org/x/sys",
		"golang.org/x/time",
	}
	if !slices.Equal(modules, want) {
		t.Errorf("modules in the graph = %v; want %v", modules, want)
	}
}

// buildOffline builds the module in dir with no workspace, no proxy and the
// local toolchain, and returns the module paths of its graph, sorted; it
// fails t when a module in the graph asks for a go line newer than the
// client's or the build raised the module's own.
func buildOffline(t *testing.T, dir, what string) []string {
	t.Helper()
	env := []string{"GOWORK=off", "GOFLAGS=-mod=mod -buildvcs=false", "GOPROXY=off", "GOTOOLCHAIN=local"}
	goCmd(t, dir, env, "build", "-o", filepath.Join(dir, "clientuser"), ".")
	graph := goCmd(t, dir, env, "mod", "graph")
	t.Logf("go mod graph of a module %s:\n%s", what, graph)

	var modules []string
	sc := bufio.NewScanner(strings.NewReader(graph))
	for sc.Scan() {
		for _, node := range strings.Fields(sc.Text()) {
			path, version, _ := strings.Cut(node, "@")
			switch path {
			case "go":
				if newerGo(version, clientGoLine) {
					t.Errorf("graph edge %q: go %s is newer than the client's %s", sc.Text(), version, clientGoLine)
				}
				continue
			case "toolchain":
				continue
			}
			if !slices.Contains(modules, path) {
				modules = append(modules, path)
			}
		}
	}
	slices.Sort(modules)
	// The build kept the module's go line: nothing raised it.
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mod), "\ngo "+clientGoLine+"\n") {
		t.Errorf("go.mod after the build:\n%s\nwant its go line still %s", mod, clientGoLine)
	}
	return modules
}

// newerGo reports whether Go version a (1.N or 1.N.P) is newer than b.
func newerGo(a, b string) bool {
	parse := func(v string) [3]int {
		var n [3]int
		for i, f := range strings.SplitN(v, ".", 3) {
			n[i], _ = strconv.Atoi(f)
		}
		return n
	}
	x, y := parse(a), parse(b)
	return slices.Compare(x[:], y[:]) > 0
}
