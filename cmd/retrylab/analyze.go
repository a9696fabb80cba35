package main

import (
	"context"
)

func cmdAnalyze(ctx context.Context, e *env, args []string) error {
	var vf verdictFlags
	fs := newFlags("analyze", e)
	vf.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("analyze takes one timeline file, got %d arguments", fs.NArg())
	}
	path := fs.Arg(0)
	e, err := vf.redirect(e)
	if err != nil {
		return err
	}
	opts, err := vf.options()
	if err != nil {
		return err
	}
	if err := checkWritable("", vf.files()); err != nil {
		return err
	}
	v, err := analyzeFile(path, opts)
	if err != nil {
		return err
	}
	if err := vf.emit(e, v); err != nil {
		return err
	}
	return verdictErr(v)
}
