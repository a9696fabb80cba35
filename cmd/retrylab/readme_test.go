package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/retrylab/retrylab/analyzer"
	"github.com/retrylab/retrylab/scenarios"

	"github.com/spf13/pflag"
)

// quickstart returns the commands of the README's quick-start block.
func quickstart(t *testing.T) []string {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := bytes.Cut(readme, []byte("<!-- quickstart"))
	if !ok {
		t.Fatal("README.md has no quickstart marker")
	}
	_, block, _ := bytes.Cut(after, []byte("```sh\n"))
	block, _, _ = bytes.Cut(block, []byte("```"))
	var cmds []string
	sc := bufio.NewScanner(bytes.NewReader(block))
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		if line = strings.TrimSpace(line); line != "" {
			cmds = append(cmds, line)
		}
	}
	return cmds
}

// TestReadmeQuickStart runs the README's set-up commands: the main job on
// the built-in defaults (in-process, in a scratch directory, so its out/
// lands there), and checks that the test command is the Makefile's.
func TestReadmeQuickStart(t *testing.T) {
	cmds := quickstart(t)
	if len(cmds) != 2 {
		t.Fatalf("quick start has %d commands %q; want 2 (the main job, the tests)", len(cmds), cmds)
	}
	const prefix = "go run ./cmd/retrylab "
	if !strings.HasPrefix(cmds[0], prefix) {
		t.Fatalf("first quick-start command %q; want %q...", cmds[0], prefix)
	}
	if cmds[1] != "make test" {
		t.Fatalf("second quick-start command %q; want make test", cmds[1])
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("`(make build && export PATH=[^`]+)`").FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md does not say how to put retrylab on the PATH (`make build && export PATH=...`)")
	}
	checkQuickStartPath(t, string(m[1]))
	checkQuickStartWarning(t)
	if testing.Short() {
		t.Skip("the main job runs about 7 s of real time")
	}
	mk := exec.Command("make", "-n", "test")
	mk.Dir = "../.."
	if out, err := mk.CombinedOutput(); err != nil || !strings.Contains(string(out), "go test -race") {
		t.Errorf("make -n test: %v\n%s; want it to run go test -race", err, out)
	}

	t.Chdir(t.TempDir())
	args := strings.Fields(strings.TrimPrefix(cmds[0], prefix))
	code, stdout, stderr := runCmdCtx(t, context.Background(), args...)
	if code != exitOK {
		t.Fatalf("%s: exit %d; want 0\nstdout:\n%s\nstderr:\n%s", cmds[0], code, stdout, stderr)
	}
	for _, want := range []string{"logical requests:", "verdict: PASS", "report: out/"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("%s: stdout lacks %q:\n%s", cmds[0], want, stdout)
		}
	}
	html, _ := filepath.Glob("out/*/report.html")
	tl, _ := filepath.Glob("out/*/timeline.ndjson")
	if len(html) != 1 || len(tl) != 1 {
		t.Errorf("out/ holds reports %v and timelines %v; want one of each", html, tl)
	}
}

// checkQuickStartWarning: the quick start's scenario is one whose honest
// clients come back together (its description says the analyzer reports
// server-induced synchronization), so its PASS may carry that warning
// (whether it does depends on the host's noise); the README explains it
// beside the quick start, addressed to whom it concerns.
func checkQuickStartWarning(t *testing.T) {
	t.Helper()
	sc, err := scenarios.Builtin("outage-date")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(sc.Description, "server-induced synchronization") {
		t.Fatalf("outage-date's description %q no longer names the warning its honest clients draw: revisit the README's quick start", sc.Description)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, _ := bytes.Cut(readme, []byte("The first runs the built-in `outage-date`"))
	para, _, _ := bytes.Cut(after, []byte("## "))
	for _, want := range []string{"*server-induced synchronization* warning", "addressed to the server", "retry_after.spread", "RetryAfterJitter"} {
		if !bytes.Contains(para, []byte(want)) {
			t.Errorf("README.md's quick start does not say %q about the server-induced synchronization warning its run may print", want)
		}
	}
}

// checkQuickStartPath: the quick start's last command builds retrylab
// where make build puts it and puts that directory on the PATH, and every
// `retrylab …` command of the README's tables names a command retrylab
// has, so that the rows run as written after the quick start.
func checkQuickStartPath(t *testing.T, cmd string) {
	t.Helper()
	build, export, ok := strings.Cut(cmd, " && ")
	if !ok || build != "make build" {
		t.Fatalf("the PATH command %q; want make build && export PATH=...", cmd)
	}
	mk := exec.Command("make", "-n", "build")
	mk.Dir = "../.."
	out, err := mk.CombinedOutput()
	m := regexp.MustCompile(`build -o (\S+)/retrylab \./cmd/retrylab`).FindSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("make -n build: %v\n%s; want a go build -o DIR/retrylab ./cmd/retrylab", err, out)
	}
	if want := `export PATH="$PWD/` + string(m[1]) + `:$PATH"`; export != want {
		t.Errorf("quick start puts %q on the PATH; want %q (make build writes %s/retrylab)", export, want, m[1])
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := regexp.MustCompile("`retrylab ([a-z]+)").FindAllSubmatch(readme, -1)
	if len(rows) < 5 {
		t.Fatalf("README.md names %d retrylab commands; want its tables' rows", len(rows))
	}
	for _, r := range rows {
		if _, ok := commands[string(r[1])]; !ok {
			t.Errorf("README.md says `retrylab %s`, which is no command of retrylab", r[1])
		}
	}
}

var flagRE = regexp.MustCompile("`--([a-z-]+)")

// TestReadmeNamesEveryFlag keeps the flag reference complete: every flag
// a command's help lists is in docs/cli.md (the README's command reference,
// moved out of it) or the README.
func TestReadmeNamesEveryFlag(t *testing.T) {
	documented := map[string]bool{}
	for _, doc := range []string{"../../README.md", "../../docs/cli.md"} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range flagRE.FindAllSubmatch(b, -1) {
			documented[string(m[1])] = true
		}
	}
	for name, cmd := range commands {
		var out bytes.Buffer
		e := &env{stdout: &out, stderr: &out}
		cmd.run(context.Background(), e, []string{"--help"})
		for _, m := range regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z-]+)`).FindAllStringSubmatch(out.String(), -1) {
			if m[1] == "help" {
				continue
			}
			if !documented[m[1]] {
				t.Errorf("retrylab %s --%s is not in docs/cli.md", name, m[1])
			}
		}
	}
	_ = pflag.ErrHelp
}

// TestReadmeShellBlocksAreRun: the README's only shell block is the quick
// start, which TestReadmeQuickStart runs; the commands of the reference
// pages live there, each page's own tests reading its examples.
func TestReadmeShellBlocksAreRun(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const marker = "<!-- quickstart: a test in cmd/retrylab runs these commands -->"
	sh, in, prev := 0, false, ""
	for i, line := range strings.Split(string(readme), "\n") {
		if fence, ok := strings.CutPrefix(line, "```"); ok {
			if !in {
				switch fence {
				case "sh", "bash", "shell", "console":
					sh++
					if prev != marker {
						t.Errorf("README.md:%d: a shell block that no test runs: move it to a reference page, or run it", i+1)
					}
				}
			}
			in = !in
		}
		prev = line
	}
	if sh != 1 {
		t.Errorf("README.md has %d shell blocks; want 1, the quick start", sh)
	}
	if n := bytes.Count(readme, []byte("\n")); n > 500 {
		t.Errorf("README.md has %d lines; keep it under 500 (reference material goes to docs/)", n)
	}
}

// TestReadmeThresholdsSayWhoOverrides: where the README's check table
// gives a check's default threshold and a built-in scenario sets its own
// (expect.thresholds), the row says so: it names the built-in and its
// value beside the default, so `run metastable` judging load-amplification
// against 8 does not contradict a table that says 1.5.
func TestReadmeThresholdsSayWhoOverrides(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z-]+)` \\| (.*) \\|$").FindAllStringSubmatch(string(readme), -1) {
		rows[m[1]] = m[2]
	}
	seen := 0
	for _, sc := range scenarios.Builtins() {
		for id, v := range sc.Expect.Thresholds {
			c, ok := analyzer.LookupCheck(id)
			row, inTable := rows[id]
			if !ok || !inTable || c.Threshold.None {
				continue
			}
			seen++
			def, own := strconv.FormatFloat(c.Threshold.Num, 'g', -1, 64), strconv.FormatFloat(v, 'g', -1, 64)
			if !strings.Contains(row, def) {
				t.Errorf("README's %s row does not give the default threshold %s: %s", id, def, row)
			}
			if !strings.Contains(row, "is the default") || !strings.Contains(row, "`"+sc.Name+"`") || !strings.Contains(row, "with "+own) {
				t.Errorf("README's %s row gives %s but not that it is the default and %s overrides it with %s (\"%s is the default; `%s` overrides it with %s\"): %s",
					id, def, sc.Name, own, def, sc.Name, own, row)
			}
		}
	}
	if seen == 0 {
		t.Fatal("no built-in overrides a threshold in the README's check table: the test judged nothing")
	}
}
