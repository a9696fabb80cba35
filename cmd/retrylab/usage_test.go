package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// helpOf runs retrylab NAME ARGS... --help in-process and returns what it
// printed and the flag set the command defined.
func helpOf(t *testing.T, name string, args ...string) (string, *pflag.FlagSet) {
	t.Helper()
	var out bytes.Buffer
	var fs *pflag.FlagSet
	e := &env{stdout: &out, stderr: &out, flags: &fs}
	err := commands[name].run(context.Background(), e, append(args, "--help"))
	if !errors.Is(err, pflag.ErrHelp) {
		t.Fatalf("retrylab %s %v --help: %v; want pflag.ErrHelp (exit 0)", name, args, err)
	}
	if fs == nil {
		t.Fatalf("retrylab %s made no flag set through newFlags", name)
	}
	return out.String(), fs
}

func helpCommands() []string {
	var names []string
	for n := range commands {
		if n != "help" {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// TestHelpListsEveryFlag: every command's help is rendered from its flag
// set: each visible flag is in the synopsis and in the flag list, with
// its shorthand; a hidden or deprecated one is in neither; no boolean
// prints pflag's "[=true|false]"; the help has the one-line description,
// an example and the exit status.
func TestHelpListsEveryFlag(t *testing.T) {
	for _, name := range helpCommands() {
		t.Run(name, func(t *testing.T) {
			help, fs := helpOf(t, name)
			usage, rest, ok := strings.Cut(help, "\nExample:\n")
			if !ok {
				t.Fatalf("help has no Example:\n%s", help)
			}
			_, flags, ok := strings.Cut(rest, "\nFlags:\n")
			if !ok {
				t.Fatalf("help has no Flags:\n%s", help)
			}
			if !strings.HasPrefix(help, "retrylab "+name+": "+commands[name].summary+"\n") {
				t.Errorf("help does not begin with the one-line description %q:\n%s", commands[name].summary, help)
			}
			synopsis := strings.Join(strings.Fields(usage), " ")
			if !strings.Contains(synopsis, "retrylab "+name) {
				t.Errorf("synopsis %q lacks retrylab %s", synopsis, name)
			}
			if strings.Contains(help, "[=true|false]") || strings.Contains(help, "[=") {
				t.Errorf("help prints a boolean with its value:\n%s", help)
			}
			n := 0
			lines := "\n" + flags
			fs.VisitAll(func(f *pflag.Flag) {
				term := "\n      --" + f.Name
				inSynopsis := strings.Contains(synopsis, "--"+f.Name+" ") || strings.Contains(synopsis, "--"+f.Name+"]")
				if f.Shorthand != "" {
					term = "\n  -" + f.Shorthand + ", --" + f.Name
					inSynopsis = strings.Contains(synopsis, "-"+f.Shorthand+" ")
				}
				listed := strings.Contains(lines, term+" ") || strings.Contains(lines, term+"\n")
				if f.Hidden {
					if listed || inSynopsis {
						t.Errorf("hidden flag --%s is in the help", f.Name)
					}
					return
				}
				n++
				if !listed {
					t.Errorf("flag --%s is not listed:\n%s", f.Name, flags)
				}
				if !inSynopsis {
					t.Errorf("flag --%s is not in the synopsis %q", f.Name, synopsis)
				}
			})
			if n == 0 && !strings.Contains(flags, "(none)") {
				t.Errorf("a command without flags says so:\n%s", flags)
			}
			if !strings.Contains(help, "\nExit status: ") {
				t.Errorf("help lacks the exit status:\n%s", help)
			}
		})
	}
}

// TestHelpExitCodes: the verdict commands' help gives the exit codes the
// README and docs/ci.md give, and 3 is INCONCLUSIVE, not a "run error".
func TestHelpExitCodes(t *testing.T) {
	oneLine := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	for _, name := range []string{"run", "analyze", "compare"} {
		help, _ := helpOf(t, name)
		h := oneLine(help)
		for _, want := range []string{"0 PASS", "1 FAIL", "2 bad input or usage", "3 INCONCLUSIVE"} {
			if !strings.Contains(h, want) {
				t.Errorf("retrylab %s --help lacks %q:\n%s", name, want, help)
			}
		}
	}
	for _, name := range helpCommands() {
		if help, _ := helpOf(t, name); strings.Contains(help, "run error") {
			t.Errorf("retrylab %s --help still says \"run error\"", name)
		}
	}
	var top bytes.Buffer
	if err := runEnv(context.Background(), &env{stdout: &top, stderr: &top}, []string{"--help"}); err != nil {
		t.Fatal(err)
	}
	const want = "Exit status: 0 PASS, 1 FAIL, 2 bad input or usage, 3 INCONCLUSIVE or a run that could not be carried out."
	if !strings.Contains(top.String(), want) {
		t.Errorf("retrylab --help lacks %q:\n%s", want, top.String())
	}
	for doc, wants := range map[string][]string{
		"../../README.md":  {"0 PASS, 1 FAIL", "2 bad input", "3 INCONCLUSIVE"},
		"../../docs/ci.md": {"| 0 | PASS |", "| 1 | FAIL", "| 2 | bad input", "| 3 | INCONCLUSIVE"},
	} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range wants {
			if !strings.Contains(oneLine(string(b)), want) {
				t.Errorf("%s does not give the exit code %q", doc, want)
			}
		}
	}
}

// TestHelpExamplesParse: each command's example names only flags the
// command takes, with values its flags accept.
func TestHelpExamplesParse(t *testing.T) {
	for _, name := range helpCommands() {
		ex := strings.Fields(cmdDocs[name].example)
		if len(ex) == 0 || ex[0] != name {
			t.Errorf("retrylab %s: example %q does not run the command", name, cmdDocs[name].example)
			continue
		}
		helpOf(t, name, ex[1:]...) // fails unless every flag parses before --help
	}
}

// TestServeOutputSpelling: serve writes its recording with -o/--output,
// as merge writes its timeline; --record still works, deprecated, with a
// warning naming the new spelling.
func TestServeOutputSpelling(t *testing.T) {
	dir := t.TempDir()
	for _, flag := range []string{"-o", "--output", "--record"} {
		rec := filepath.Join(dir, strings.TrimLeft(flag, "-")+".ndjson")
		if err := os.WriteFile(rec, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		_, err := parseServe(&env{stdout: &stderr, stderr: &stderr}, []string{"--addr", "127.0.0.1:0", flag, rec})
		if code := exitCode(err, &stderr); code != exitUsage || !strings.Contains(stderr.String(), "--output "+rec+": the file exists; pass --force") {
			t.Errorf("serve %s EXISTING: exit %d, %q; want %d naming --output and --force", flag, code, stderr.String(), exitUsage)
		}
		deprecated := strings.Contains(stderr.String(), "--record has been deprecated, use -o/--output")
		if deprecated != (flag == "--record") {
			t.Errorf("serve %s: stderr %q; want the deprecation warning only for --record", flag, stderr.String())
		}
		o, err := parseServe(&env{stdout: &stderr, stderr: &stderr}, []string{"--addr", "127.0.0.1:0", flag, rec, "--force"})
		if err != nil || o.record != rec {
			t.Errorf("serve %s FILE --force: record %q, %v; want %q", flag, o.record, err, rec)
		}
	}
}

// TestReportOutIsAParent: report --out DIR, like run's and compare's,
// creates a directory of its own under DIR, named after the timeline's
// run; a second report gets another; without --out the report goes beside
// the timeline.
func TestReportOutIsAParent(t *testing.T) {
	src, err := os.ReadFile("testdata/early.ndjson")
	if err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(t.TempDir(), "outage-retrylab-1")
	if err := os.MkdirAll(run, 0o755); err != nil {
		t.Fatal(err)
	}
	tl := filepath.Join(run, "timeline.ndjson")
	if err := os.WriteFile(tl, src, 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	for _, want := range []string{"outage-retrylab-1", "outage-retrylab-1-2"} {
		code, stdout, stderr := runCmd(t, "report", tl, "--out", out)
		if code != exitOK {
			t.Fatalf("report --out: exit %d\n%s%s", code, stdout, stderr)
		}
		html := filepath.Join(out, want, "report.html")
		if _, err := os.Stat(html); err != nil || !strings.Contains(stdout, html) {
			t.Errorf("report --out %s: stdout %q, %v; want it to write %s", out, stdout, err, html)
		}
	}
	if code, stdout, _ := runCmd(t, "report", tl); code != exitOK || !strings.Contains(stdout, filepath.Join(run, "report.html")) {
		t.Errorf("report without --out: exit %d, %q; want the report beside the timeline", code, stdout)
	}
	for path, want := range map[string]string{"a/merged.ndjson": "merged", "x/run-1/timeline.ndjson": "run-1", "t": "t"} {
		if got := reportName(path); got != want {
			t.Errorf("reportName(%q) = %q; want %q", path, got, want)
		}
	}
}

// TestHelpGoesToStdout: help asked for is the command's output, on stdout
// with exit 0, whichever way it is asked (`CMD --help`, `help CMD`,
// `help help`, `help --help`); a usage error goes to stderr.
func TestHelpGoesToStdout(t *testing.T) {
	for _, args := range [][]string{{"run", "--help"}, {"run", "-h"}, {"help", "run"}, {"help", "help"}, {"help", "--help"}, {"analyze", "--json", "x", "--help"}} {
		var out, errb bytes.Buffer
		err := run(context.Background(), args, &out, &errb)
		if code := exitCode(err, io.Discard); code != 0 {
			t.Errorf("%v: exit %d (%v); want 0", args, code, err)
		}
		if !strings.Contains(out.String(), "Usage") || errb.Len() != 0 {
			t.Errorf("%v: stdout %q, stderr %q; want the help on stdout only", args, head(out.String()), errb.String())
		}
	}
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"run", "--no-such-flag"}, &out, &errb)
	if code := exitCode(err, &errb); code != 2 || out.Len() != 0 || !strings.Contains(errb.String(), "no-such-flag") {
		t.Errorf("a bad flag: exit %d, stdout %q, stderr %q; want 2 naming the flag on stderr, nothing on stdout", code, head(out.String()), head(errb.String()))
	}
}

func head(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
