package examples

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"
)

// root is the repository, where each example's tests run from.
const root = "../.."

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
	buildOut  []byte
)

// retrylab builds the CLI once for the suite ($RETRYLAB, when set, names
// a binary to test instead).
func retrylab(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("RETRYLAB"); bin != "" {
		return bin
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "retrylab-examples-")
		if err != nil {
			buildErr = err
			return
		}
		binary = filepath.Join(dir, "retrylab")
		cmd := exec.Command("go", "build", "-o", binary, "./cmd/retrylab")
		cmd.Dir = root
		buildOut, buildErr = cmd.CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("go build ./cmd/retrylab: %v\n%s", buildErr, buildOut)
	}
	return binary
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binary != "" {
		os.RemoveAll(filepath.Dir(binary))
	}
	os.Exit(code)
}

// missing skips the test for a missing tool, or fails it under CI=true,
// where .ci/run has installed every tool an example needs.
func missing(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: .ci/run installs it)", why)
	}
	t.Skip(why)
}

// runExample runs an example's tests from the repository's root with the
// built retrylab as $RETRYLAB, and fails with their output when they fail.
// A run takes well under a minute; three minutes is its hard stop.
func runExample(t *testing.T, name string, args ...string) (string, int) {
	t.Helper()
	bin := retrylab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "RETRYLAB="+bin, "PYTHONDONTWRITEBYTECODE=1")
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("%s %q: %v\n%s", name, args, err, out)
	}
	return string(out), cmd.ProcessState.ExitCode()
}

// python returns a python3 that has pytest, preferring one that also has
// requests: the one on PATH, else Debian's (apt-get install python3-pytest
// python3-requests provides them for /usr/bin/python3).
func python(t *testing.T) string {
	t.Helper()
	var found, withPytest string
	for _, p := range []string{"python3", "/usr/bin/python3"} {
		path, err := exec.LookPath(p)
		if err != nil {
			continue
		}
		found = path
		if exec.Command(path, "-c", "import pytest").Run() != nil {
			continue
		}
		if exec.Command(path, "-c", "import requests").Run() == nil {
			return path
		}
		if withPytest == "" {
			withPytest = path
		}
	}
	switch {
	case withPytest != "":
		return withPytest
	case found == "":
		missing(t, "python3 is not installed")
	default:
		missing(t, "no python3 here has pytest (Debian package python3-pytest)")
	}
	return ""
}

// TestPythonExamples runs pytest over examples/python: the urllib loop and
// its mistakes through serve's control API and through exec, and requests
// with urllib3's Retry when requests is installed.
func TestPythonExamples(t *testing.T) {
	if testing.Short() {
		t.Skip("runs about 30 s of real time")
	}
	t.Parallel()
	py := python(t)
	out, code := runExample(t, py, "-m", "pytest", "examples/python", "-p", "no:cacheprovider", "-rs", "-q")
	if code != 0 {
		t.Fatalf("pytest exit %d\n%s", code, out)
	}
	m := regexp.MustCompile(`(\d+) passed`).FindStringSubmatch(out)
	if m == nil || atoi(m[1]) < 11 {
		t.Errorf("pytest passed %v tests; want at least 11 (the urllib examples)\n%s", m, out)
	}
	if os.Getenv("CI") == "true" && regexp.MustCompile(`\d+ skipped`).MatchString(out) {
		t.Errorf("pytest skipped tests under CI=true (.ci/run installs python3-requests)\n%s", out)
	}
	t.Logf("%s", out)
}

// TestNodeExamples runs node --test over examples/node: the fetch loop and
// its mistakes, through serve's control API and through exec.
func TestNodeExamples(t *testing.T) {
	if testing.Short() {
		t.Skip("runs about 30 s of real time")
	}
	t.Parallel()
	node, err := exec.LookPath("node")
	if err != nil {
		missing(t, "node is not installed (Debian package nodejs, 20 or later)")
	}
	v, err := exec.Command(node, "-p", "process.versions.node.split('.')[0]").Output()
	if err != nil || atoi(string(regexp.MustCompile(`\d+`).Find(v))) < 20 {
		missing(t, "node is older than 20 (global fetch, node:test's describe and skip): "+string(v))
	}
	out, code := runExample(t, node, "--test", "examples/node")
	if code != 0 {
		t.Fatalf("node --test exit %d\n%s", code, out)
	}
	for _, want := range []string{"# pass 11", "# fail 0", "# skipped 0"} {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(want) + `$`).MatchString(out) {
			t.Errorf("node --test output lacks %q\n%s", want, out)
		}
	}
}

// TestShellExample runs examples/shell/test.sh: curl --retry against serve.
func TestShellExample(t *testing.T) {
	if testing.Short() {
		t.Skip("runs about 20 s of real time")
	}
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		missing(t, "curl is not installed")
	}
	out, code := runExample(t, "sh", "examples/shell/test.sh")
	switch {
	case code == 77:
		missing(t, out)
	case code != 0:
		t.Fatalf("examples/shell/test.sh exit %d\n%s", code, out)
	}
	if n := regexp.MustCompile(`(?m)^ok: `).FindAllStringIndex(out, -1); len(n) != 5 {
		t.Errorf("examples/shell/test.sh: %d cases ok; want 5\n%s", len(n), out)
	}
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
