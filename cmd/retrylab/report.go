package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/retrylab/retrylab/runner"
)

func cmdReport(ctx context.Context, e *env, args []string) error {
	var (
		vf  verdictFlags
		out string
	)
	fs := newFlags("report", e)
	fs.StringVar(&out, "out", "", "create the report's own directory, named after the timeline's run, under `DIR` (default: write into the timeline's directory)")
	vf.registerSelection(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("report takes one timeline file, got %d arguments", fs.NArg())
	}
	path := fs.Arg(0)
	opts, err := vf.options()
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if out != "" {
		dir = out
	}
	if err := checkWritable(dir, nil); err != nil {
		return err
	}
	// One pass: the verdict and the report's figures come from one
	// analyzer, with the --check and --skip flags.
	c, err := collectFile(path, opts)
	if err != nil {
		return err
	}
	if out != "" {
		// --out is a parent, as for run and compare: the report gets a
		// directory of its own, never another one's.
		if dir, err = runner.NewRunDir(out, reportName(path)); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
	}
	rep, err := c.Write(dir, c.Verdict())
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "report: %s\n", rep.HTML)
	return nil
}

// reportName names the directory report --out creates for the timeline
// at path: its run's directory name for a run's timeline.ndjson, else the
// file's name without its extension (merged.ndjson: merged).
func reportName(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	base := filepath.Base(abs)
	if base == "timeline.ndjson" {
		if dir := filepath.Base(filepath.Dir(abs)); dir != "/" && dir != "." {
			return dir
		}
	}
	if name := strings.TrimSuffix(base, filepath.Ext(base)); name != "" {
		return name
	}
	return "report"
}
