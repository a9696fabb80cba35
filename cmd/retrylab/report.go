package main

import (
	"context"
	"fmt"
	"path/filepath"
)

const reportUsage = "report TIMELINE [--out DIR] [--check ID[:k=v]] [--skip IDS]"

func cmdReport(ctx context.Context, e *env, args []string) error {
	var (
		vf  verdictFlags
		out string
	)
	fs := newFlags("report", reportUsage, e)
	fs.StringVar(&out, "out", "", "write report.html and the plots to `DIR` (default: the timeline's directory)")
	vf.registerSelection(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("report takes one timeline file, got %d arguments", fs.NArg())
	}
	path := fs.Arg(0)
	if out == "" {
		out = filepath.Dir(path)
	}
	opts, err := vf.options()
	if err != nil {
		return err
	}
	if err := checkWritable(out, nil); err != nil {
		return err
	}
	// One pass: the verdict and the report's figures come from one
	// analyzer, with the --check and --skip flags.
	c, err := collectFile(path, opts)
	if err != nil {
		return err
	}
	rep, err := c.Write(out, c.Verdict())
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "report: %s\n", rep.HTML)
	return nil
}
