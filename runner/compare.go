// A comparison's runs: every subject, each with several seeds, one after
// the other.

package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/retrylab/retrylab/scenarios"
	"github.com/retrylab/retrylab/subjects"
)

// CompareOptions are the runs of a comparison: every subject of Subjects,
// in order, each Seeds times with seeds Run.Seed, Run.Seed+1, …
type CompareOptions struct {
	Subjects []subjects.Subject
	// Names are the subjects as the user named them, in the run
	// directories' names (default: each subject's Name).
	Names []string
	Seeds int // runs per subject; at least 1
	// Run is every run's options. Compare sets Subject and Seed, and
	// clears Detach: the next run must not share the CPU with this one's
	// wind-down.
	Run RunOptions
	// Dir is the comparison's directory (made by NewRunDir): each run
	// records into a directory of its own under it, NAME-seedN.
	Dir string
	// Create makes each run's timeline file (nil: CreateTimeline).
	Create func(path string) (*os.File, error)
	// Setup, when set, completes a run's options before it starts (the
	// CLI gives each run its quota backend and progress bars, from
	// CompareRun.ID); done, when not nil, is called once the run is over.
	// An error stops the comparison.
	Setup func(r *CompareRun, opts *RunOptions) (done func(), err error)
	// Each, when set, is called after every run with RunInDir's error
	// (r.Summary is nil when the run did not start). An error stops the
	// comparison, and Compare returns it.
	Each func(r *CompareRun, err error) error
}

// CompareRun is one run of a comparison.
type CompareRun struct {
	Subject subjects.Subject
	Name    string // CompareOptions.Names' name of the subject
	Seed    int64
	Dir     string // the run's directory
	// ID is the comparison's directory's name and the run's,
	// "compare-…/NAME-seedN": every run its own quota in Redis.
	ID      string
	Summary *Summary
}

// ErrCompareInterrupted is Compare's error when ctx ended before any run
// finished.
var ErrCompareInterrupted = errors.New("compare: interrupted before any run finished")

// Compare plays sc once per subject and seed, in order, each run into its
// own directory under opts.Dir (RunInDir), and returns the runs that
// finished. A run directory that could not be made is a *CreateError. Once ctx ends no further run starts; the one going on stops as
// Run does on ctx, and is returned.
func Compare(ctx context.Context, sc *scenarios.Scenario, opts CompareOptions) ([]CompareRun, error) {
	var runs []CompareRun
	for i, subj := range opts.Subjects {
		name := subj.Name()
		if i < len(opts.Names) {
			name = opts.Names[i]
		}
		for k := 0; k < opts.Seeds; k++ {
			if ctx.Err() != nil {
				break
			}
			ro := opts.Run
			ro.Subject, ro.Seed, ro.Detach = subj, opts.Run.Seed+int64(k), false
			dir, err := NewRunDir(opts.Dir, fmt.Sprintf("%s-seed%d", SafeName(name), ro.Seed))
			if err != nil {
				return runs, &CreateError{Err: err}
			}
			r := CompareRun{Subject: subj, Name: name, Seed: ro.Seed, Dir: dir,
				ID: filepath.Base(opts.Dir) + "/" + filepath.Base(dir)}
			done := func() {}
			if opts.Setup != nil {
				d, err := opts.Setup(&r, &ro)
				if err != nil {
					return runs, err
				}
				if d != nil {
					done = d
				}
			}
			r.Summary, err = RunInDir(ctx, sc, ro, dir, opts.Create)
			done()
			if opts.Each != nil {
				err = opts.Each(&r, err)
			}
			if err != nil {
				return runs, err
			}
			runs = append(runs, r)
		}
	}
	if len(runs) == 0 {
		return nil, ErrCompareInterrupted
	}
	return runs, nil
}
