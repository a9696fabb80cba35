package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/retrylab/retrylab/internal/atomicfile"
	"github.com/retrylab/retrylab/timeline"
)

func cmdMerge(ctx context.Context, e *env, args []string) error {
	var (
		out         string
		force       bool
		uncertainty time.Duration
	)
	fs := newFlags("merge", e)
	fs.StringVarP(&out, "output", "o", "", "write the merged timeline to `FILE`; an existing file is refused unless --force")
	fs.BoolVar(&force, "force", false, "overwrite an existing --output file")
	fs.DurationVar(&uncertainty, "clock-uncertainty", timeline.DefaultClockUncertainty, "how far apart the clocks of the files' hosts may be, `D`: the merged meta's clock_uncertainty, which widens the retry-after tolerance; when not given, 0 for files of one host and this default for files of several")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if out == "" {
		return usagef("merge needs -o FILE, the merged timeline")
	}
	if fs.NArg() == 0 {
		return usagef("merge takes the timeline files to merge (the stubs' recordings (serve -o) and every run shard's timeline.ndjson), or directories holding them, got none")
	}
	if uncertainty < 0 {
		return usagef("--clock-uncertainty must be >= 0, got %v", uncertainty)
	}
	if fi, err := os.Stat(out); err == nil {
		if fi.IsDir() {
			return usagef("--output %s: is a directory", out)
		}
		if !force {
			return usagef("--output %s: the file exists; pass --force to overwrite it", out)
		}
	}
	if err := probeDir(filepath.Dir(out)); err != nil {
		return usagef("--output %s: %v", out, err)
	}

	var inputs []timeline.MergeInput
	var infos []os.FileInfo
	outInfo, _ := os.Stat(out)
	paths, err := mergeInputs(fs.Args(), outInfo)
	if err != nil {
		return err
	}
	for _, path := range paths {
		f, err := openTimeline(path)
		if err != nil {
			closeInputs(inputs)
			return err
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			closeInputs(inputs)
			return badInput(err)
		}
		for i, prev := range infos {
			if os.SameFile(fi, prev) {
				f.Close()
				closeInputs(inputs)
				return usagef("%s and %s are the same file: merging it twice would count its records twice", inputs[i].Name, path)
			}
		}
		if outInfo != nil && os.SameFile(fi, outInfo) {
			f.Close()
			closeInputs(inputs)
			return usagef("--output %s is also an input", out)
		}
		infos = append(infos, fi)
		inputs = append(inputs, timeline.MergeInput{Name: path, R: f})
	}
	defer closeInputs(inputs)

	var sum *timeline.MergeSummary
	err = atomicfile.Write(out, func(w io.Writer) error {
		var err error
		sum, err = timeline.Merge(w, inputs, timeline.MergeOptions{ClockUncertainty: uncertainty, UncertaintySet: fs.Changed("clock-uncertainty")})
		return err
	})
	var me *timeline.MergeError
	if errors.As(err, &me) {
		return badInput(err)
	}
	if err != nil {
		return fmt.Errorf("merge: --output %s: %w", out, err)
	}
	m := sum.Meta
	fmt.Fprintf(e.stdout, "merged %d files into %s: %d attempts, %d outcomes of %d scheduled", len(inputs), out, sum.Attempts, sum.Outcomes, m.Scheduled)
	if sum.Renumbered > 0 {
		fmt.Fprintf(e.stdout, ", %d attempts renumbered (retries seen by several replicas)", sum.Renumbered)
	}
	fmt.Fprintf(e.stdout, "\n  epoch %s; clock uncertainty between hosts %v", m.Epoch.Format(time.RFC3339Nano), time.Duration(m.ClockUncertainty))
	if m.Recorder == "run" && sum.End == nil {
		fmt.Fprint(e.stdout, "; no end record: a fleet file has none (its shard was killed or its file cut short)")
	}
	fmt.Fprintln(e.stdout)
	// The recordings do not back some outcomes: the merged end record says
	// so (analyze: INCONCLUSIVE), and so does merge, on stderr.
	for _, p := range sum.Problems {
		fmt.Fprintf(e.stderr, "retrylab: merge: warning: %s\n", p)
	}
	return nil
}

func closeInputs(inputs []timeline.MergeInput) {
	for _, in := range inputs {
		if c, ok := in.R.(io.Closer); ok {
			c.Close()
		}
	}
}

// mergeInputs expands args: a directory stands for every *.ndjson file
// below it, in lexical order, but the output (so that a container without
// a shell to expand globs can merge a results volume into itself: `merge
// -o /results/merged.ndjson /results`). A directory holding none is an
// error naming it.
func mergeInputs(args []string, out os.FileInfo) ([]string, error) {
	var paths []string
	for _, arg := range args {
		fi, err := os.Stat(arg)
		if err != nil || !fi.IsDir() {
			paths = append(paths, arg) // openTimeline names what is wrong
			continue
		}
		n := len(paths)
		err = filepath.WalkDir(arg, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() || filepath.Ext(path) != ".ndjson" {
				return nil
			}
			if out != nil {
				if fi, err := d.Info(); err == nil && os.SameFile(fi, out) {
					return nil
				}
			}
			paths = append(paths, path)
			return nil
		})
		if err != nil {
			return nil, badInput(fmt.Errorf("merge: %s: %w", arg, err))
		}
		if len(paths) == n {
			return nil, usagef("%s: a directory without *.ndjson timelines", arg)
		}
	}
	return paths, nil
}
