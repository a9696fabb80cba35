package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/retrylab/retrylab/analyzer"
	"github.com/retrylab/retrylab/internal/atomicfile"
	"github.com/retrylab/retrylab/timeline"
	"github.com/spf13/pflag"
)

// verdictFlags are the analyzer flags `run` and `analyze` share.
type verdictFlags struct {
	checks   []string
	skip     []string
	require  []string
	json     string
	junit    string
	markdown string
	// stdout receives the one file named "-" (see redirect).
	stdout io.Writer
}

// Stdout is the path that names standard output in --json, --junit and
// --markdown.
const Stdout = "-"

// redirect sends the command's own output to stderr when one verdict file
// is "-": stdout then carries that file alone, so that it can be piped
// (`retrylab analyze t.ndjson --json - | jq`). Two files on stdout would
// be one unreadable stream: that is bad input naming both flags. It
// returns the env the command writes its text through.
func (v *verdictFlags) redirect(e *env) (*env, error) {
	var named []string
	for _, f := range []struct{ flag, path string }{{"--json", v.json}, {"--junit", v.junit}, {"--markdown", v.markdown}} {
		if f.path == Stdout {
			named = append(named, f.flag)
		}
	}
	switch len(named) {
	case 0:
		return e, nil
	case 1:
		out := *e
		v.stdout, out.stdout = e.stdout, e.stderr
		return &out, nil
	}
	return nil, usagef("%s: only one verdict file can be written to stdout (-)", strings.Join(named, " and "))
}

// writeOut writes one verdict file: to stdout (redirect) when path is
// "-", else to path, whole or not at all.
func (v *verdictFlags) writeOut(path string, write func(io.Writer) error) error {
	if path == Stdout && v.stdout != nil {
		return write(v.stdout)
	}
	return writeFileAtomic(path, write)
}

func (v *verdictFlags) register(fs *pflag.FlagSet) {
	v.registerSelection(fs)
	fs.StringVar(&v.json, "json", "", "write the verdict as JSON to `FILE` (-: stdout, the text then on stderr)")
	fs.StringVar(&v.junit, "junit", "", "write the verdict as JUnit XML to `FILE` (one testcase per check; -: stdout, the text then on stderr)")
	fs.StringVar(&v.markdown, "markdown", "", "write the verdict as Markdown to `FILE` (PR comment, $GITHUB_STEP_SUMMARY; -: stdout, the text then on stderr)")
}

// registerSelection adds only --check and --skip, for commands that judge
// a timeline but write no verdict files of their own (report, compare).
func (v *verdictFlags) registerSelection(fs *pflag.FlagSet) {
	fs.StringArrayVar(&v.checks, "check", nil, "also run check `ID[:k=v,...]` with these parameters, e.g. waves:threshold=2.5, on top of the scenario's expect.checks (default: those, or every check when it names none); it never narrows the checks and a --skip still wins (repeatable)")
	fs.StringSliceVar(&v.skip, "skip", nil, "skip these check `IDs` (comma-separated)")
	fs.StringSliceVar(&v.require, "require", nil, "these check `IDs` must judge something: a skip makes the verdict INCONCLUSIVE (comma-separated)")
}

// options turns the flags into analyzer options; errors name the flag.
func (v *verdictFlags) options() (analyzer.Options, error) {
	var o analyzer.Options
	for _, c := range v.checks {
		spec, err := analyzer.ParseCheckSpec(c)
		if err != nil {
			return o, usagef("--check %q: %v", c, err)
		}
		o.Checks = append(o.Checks, spec)
	}
	for _, s := range v.skip {
		ids, err := analyzer.ParseCheckIDs(s)
		if err != nil {
			return o, usagef("--skip %q: %v", s, err)
		}
		o.Skip = append(o.Skip, ids...)
	}
	for _, s := range v.require {
		ids, err := analyzer.ParseCheckIDs(s)
		if err != nil {
			return o, usagef("--require %q: %v", s, err)
		}
		o.Require = append(o.Require, ids...)
	}
	if err := o.Validate(); err != nil {
		return o, usagef("%v", err)
	}
	return o, nil
}

// emit prints the verdict table and writes the requested files. Each file
// is written whole or not at all.
func (v *verdictFlags) emit(e *env, verdict *analyzer.Verdict) error {
	if err := analyzer.WriteText(e.stdout, verdict); err != nil {
		return err
	}
	outs := []struct {
		flag, path string
		write      func(io.Writer, *analyzer.Verdict) error
	}{
		{"--json", v.json, analyzer.WriteJSON},
		{"--junit", v.junit, analyzer.WriteJUnit},
		{"--markdown", v.markdown, analyzer.WriteMarkdown},
	}
	for _, o := range outs {
		if o.path == "" {
			continue
		}
		if err := v.writeOut(o.path, func(w io.Writer) error { return o.write(w, verdict) }); err != nil {
			return fmt.Errorf("%s: %w", o.flag, err)
		}
	}
	return nil
}

// errVerdictInconclusive is returned for an INCONCLUSIVE verdict. It exits
// 3, as a run that could not be carried out does, and its message is
// printed on stderr after the verdict's reasons.
var errVerdictInconclusive = errors.New("verdict INCONCLUSIVE: the run behind the timeline cannot be vouched for (reasons above); exit status 3")

// verdictErr is the error a command returns for a verdict: nil when it
// passed, errVerdictFailed when a check failed, errVerdictInconclusive when
// the run cannot be vouched for.
func verdictErr(v *analyzer.Verdict) error {
	switch {
	case v.Pass:
		return nil
	case v.Status == analyzer.VerdictInconclusive:
		return errVerdictInconclusive
	}
	return errVerdictFailed
}

// writeFileAtomic writes path whole or not at all, creating its directory.
func writeFileAtomic(path string, write func(io.Writer) error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.Write(path, write)
}

// timelineInputErr turns a timeline decoding error into bad input naming
// the file and line.
func timelineInputErr(path string, err error) error {
	var se *timeline.SyntaxError
	if errors.As(err, &se) {
		return usagef("%s:%d: %s", path, se.Line, se.Msg)
	}
	if errors.Is(err, analyzer.ErrNoRecords) {
		return usagef("%s: %v", path, err)
	}
	return err
}
