package runner

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/retrylab/retrylab/scenarios"
)

// TimelineFile is the name of a run's timeline in its directory.
const TimelineFile = "timeline.ndjson"

// CreateTimeline creates a run's timeline file; it never opens one that
// exists (another run's).
func CreateTimeline(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
}

// SafeName makes a subject name usable in a directory name: every rune
// but ASCII letters, digits, "-", "_" and "." becomes "_".
func SafeName(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '_'
	}, s)
}

// CreateError is RunInDir's error when the timeline file could not be
// created, and Compare's when a run's directory could not be: the run did
// not start.
type CreateError struct{ Err error }

func (e *CreateError) Error() string { return e.Err.Error() }
func (e *CreateError) Unwrap() error { return e.Err }

// RunInDir plays sc as Run does, recording the timeline into
// dir/TimelineFile (dir made for this run by NewRunDir), a file that
// create makes (nil: CreateTimeline) and RunInDir closes; opts.Timeline is
// ignored. The summary's TimelinePath names the file. When the timeline
// could not be written or closed the error is a *TimelineError naming it,
// with the summary of the run, which stopped at the first write error. An
// error creating the file is a *CreateError, with no summary: the run did
// not start.
func RunInDir(ctx context.Context, sc *scenarios.Scenario, opts RunOptions, dir string, create func(path string) (*os.File, error)) (*Summary, error) {
	path := filepath.Join(dir, TimelineFile)
	if create == nil {
		create = CreateTimeline
	}
	f, err := create(path)
	if err != nil {
		return nil, &CreateError{Err: err}
	}
	opts.Timeline = f
	sum, err := Run(ctx, sc, opts)
	if sum != nil {
		sum.TimelinePath = path
	}
	var te *TimelineError
	if errors.As(err, &te) {
		te.Path = path
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = &TimelineError{Path: path, Err: cerr}
	}
	return sum, err
}

// maxRunDirSuffix bounds the suffixes NewRunDir tries.
const maxRunDirSuffix = 10000

// NewRunDir creates a directory for one run under parent (created if
// needed) and returns its path: parent/name, or parent/name-2,
// parent/name-3, … when that exists. Each candidate is created with an
// exclusive os.Mkdir, so runs started at once (in one process or many)
// never share a directory, and a run never writes into a directory it
// did not create.
func NewRunDir(parent, name string) (string, error) {
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", err
	}
	for i := 1; i <= maxRunDirSuffix; i++ {
		dir := filepath.Join(parent, name)
		if i > 1 {
			dir += "-" + strconv.Itoa(i)
		}
		err := os.Mkdir(dir, 0o755)
		if err == nil {
			return dir, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", err
		}
	}
	return "", fmt.Errorf("runner: %s: %d run directories named %s already exist", parent, maxRunDirSuffix, name)
}
