package main

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/retrylab/retrylab/reports"
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
	v, err := analyzeFile(path, opts)
	if err != nil {
		return err
	}
	rep, err := reports.Write(out, path, v, reports.Options{})
	if err != nil {
		return timelineInputErr(path, err)
	}
	fmt.Fprintf(e.stdout, "report: %s\n", rep.HTML)
	return nil
}
