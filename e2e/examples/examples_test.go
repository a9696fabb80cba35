package examples

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrylab/retrylab/internal/testenv"
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
	if testenv.RaceEnabled {
		// The examples drive a retrylab built without the race detector
		// from other languages: -race adds nothing but load, and load
		// leaves timing cases unjudged. `make examples` runs them alone.
		os.Exit(0)
	}
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
	// A test the host was too loaded to judge is skipped, naming the
	// host's noise (never passed nor failed by it): it counts as run.
	passed, noisy, other := 0, 0, 0
	if m := regexp.MustCompile(`(\d+) passed`).FindStringSubmatch(out); m != nil {
		passed = atoi(m[1])
	}
	for _, m := range regexp.MustCompile(`(?m)^SKIPPED \[(\d+)\].*$`).FindAllStringSubmatch(out, -1) {
		if strings.Contains(m[0], "host noise") {
			noisy += atoi(m[1])
		} else {
			other += atoi(m[1])
		}
	}
	if passed+noisy < 12 {
		t.Errorf("pytest: %d passed, %d unjudged for the host's noise; want at least 12 (the urllib examples)\n%s", passed, noisy, out)
	}
	if os.Getenv("CI") == "true" && other > 0 {
		t.Errorf("pytest skipped %d tests under CI=true for another reason than noise (.ci/run installs python3-requests)\n%s", other, out)
	}
	if noisy > 0 {
		t.Logf("%d tests unjudged: the host was too loaded (INCONCLUSIVE)", noisy)
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
	count := func(what string) int {
		m := regexp.MustCompile(`(?m)^# ` + what + ` (\d+)$`).FindStringSubmatch(out)
		if m == nil {
			t.Errorf("node --test output lacks its # %s count\n%s", what, out)
			return 0
		}
		return atoi(m[1])
	}
	// A test the host was too loaded to judge is skipped naming the host's
	// noise (never passed nor failed by it): it counts as run.
	pass, skipped, fail := count("pass"), count("skipped"), count("fail")
	noisy := len(regexp.MustCompile(`# SKIP host noise`).FindAllString(out, -1))
	if fail != 0 || pass+skipped != 13 || skipped != noisy {
		t.Errorf("node --test: pass %d, skipped %d (%d for the host's noise), fail %d; want 13 passed or unjudged for noise, none failed\n%s", pass, skipped, noisy, fail, out)
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
	ok := len(regexp.MustCompile(`(?m)^ok: `).FindAllStringIndex(out, -1))
	noisy := len(regexp.MustCompile(`(?m)^noise: `).FindAllStringIndex(out, -1))
	if ok+noisy != 5 {
		t.Errorf("examples/shell/test.sh: %d cases ok, %d unjudged for the host's noise; want 5\n%s", ok, noisy, out)
	}
}

// TestExamplesManyClientsPerProcess runs the Python and the Node example
// as 50 clients in 4 processes (RETRYLAB_CLIENTS) on their own bare.yaml,
// the way examples/README.md shows: every client plays (50 outcomes, none
// of them the harness's), and the good policy is not FAILed. The verdict
// is PASS, or INCONCLUSIVE for the host's noise alone (logged, like the
// examples' own tests that skip on noise).
func TestExamplesManyClientsPerProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("runs about 15 s of real time")
	}
	programs := map[string]string{"python": "python3 examples/python/client.py", "node": "node examples/node/client.mjs"}
	for _, lang := range []string{"python", "node"} {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			interp, _, _ := strings.Cut(programs[lang], " ")
			if _, err := exec.LookPath(interp); err != nil {
				missing(t, interp+" is not installed")
			}
			dir := t.TempDir()
			verdict := filepath.Join(dir, "verdict.json")
			out, code := runExample(t, retrylab(t), "run", "examples/scenarios/bare.yaml", "--subject", "exec:"+programs[lang],
				"--clients", "50", "--processes", "4", "--no-report", "--quiet", "--out", dir, "--json", verdict)
			if code != 0 && code != 3 {
				t.Fatalf("exit %d; want 0 (PASS), or 3 for the host's noise\n%s", code, out)
			}
			b, err := os.ReadFile(verdict)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			var v struct {
				Verdict      string   `json:"verdict"`
				Inconclusive []string `json:"inconclusive"`
				Figures      struct {
					Outcomes int            `json:"outcomes"`
					Results  map[string]int `json:"results"`
				} `json:"figures"`
			}
			if err := json.Unmarshal(b, &v); err != nil {
				t.Fatalf("%s: %v", verdict, err)
			}
			if v.Figures.Outcomes != 50 {
				t.Errorf("%d outcomes; want 50: every client played\n%s", v.Figures.Outcomes, out)
			}
			for _, r := range v.Inconclusive {
				if !strings.Contains(r, "host's noise") {
					t.Errorf("INCONCLUSIVE: %s; want only the host's noise to leave a check unjudged\n%s", r, out)
				}
			}
			switch v.Verdict {
			case "pass":
			case "inconclusive":
				t.Logf("INCONCLUSIVE for the host's noise: %q", v.Inconclusive)
			default:
				t.Errorf("verdict %s; want pass\n%s", v.Verdict, out)
			}
		})
	}
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// TestGRPCExamples: the gRPC example clients through the exec route
// (grpcio in Python, @grpc/grpc-js in Node) against a pushback outage: the
// good policy (a service-config retryPolicy) is not failed and the common
// mistake (no retry policy) fails give-up.
func TestGRPCExamples(t *testing.T) {
	if testing.Short() {
		t.Skip("runs about 10 s of real time")
	}
	langs := []struct {
		name, cmd string
		ready     func() string // why it cannot run, "" when it can
	}{
		{"python", "/usr/bin/python3 examples/grpc/python/client.py", func() string {
			if exec.Command("/usr/bin/python3", "-c", "import grpc").Run() != nil {
				return "/usr/bin/python3 has no grpc (Debian package python3-grpcio)"
			}
			return ""
		}},
		{"node", "node examples/grpc/node/client.mjs", func() string {
			if _, err := exec.LookPath("node"); err != nil {
				return "no node on PATH (Debian package nodejs)"
			}
			if _, err := os.Stat(filepath.Join(root, "examples/grpc/node/node_modules/@grpc/grpc-js")); err != nil {
				return "@grpc/grpc-js is not installed: npm ci --prefix examples/grpc/node"
			}
			return ""
		}},
	}
	for _, lang := range langs {
		t.Run(lang.name, func(t *testing.T) {
			t.Parallel()
			if why := lang.ready(); why != "" {
				missing(t, why)
			}
			for _, tc := range []struct {
				name, args string
				codes      []int
				fails      string
			}{
				{"good", "", []int{0, 3}, ""},
				{"no-retry-policy", " --mistake no-retry-policy", []int{1}, "give-up"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					dir := t.TempDir()
					verdict := filepath.Join(dir, "verdict.json")
					out, code := runExample(t, retrylab(t), "run", "examples/scenarios/grpc-pushback.yaml",
						"--subject", "exec:"+lang.cmd+tc.args, "--no-report", "--quiet", "--out", dir, "--json", verdict)
					if !slices.Contains(tc.codes, code) {
						t.Fatalf("exit %d; want one of %v\n%s", code, tc.codes, out)
					}
					if tc.fails == "" {
						return
					}
					b, err := os.ReadFile(verdict)
					if err != nil {
						t.Fatal(err)
					}
					var v struct {
						Checks []struct{ ID, Status string } `json:"checks"`
					}
					if err := json.Unmarshal(b, &v); err != nil {
						t.Fatalf("%s: %v", verdict, err)
					}
					failed := false
					for _, c := range v.Checks {
						failed = failed || c.ID == tc.fails && c.Status == "fail"
					}
					if !failed {
						t.Errorf("%s did not fail\n%s", tc.fails, out)
					}
				})
			}
		})
	}
}
