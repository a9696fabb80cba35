package runner

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
)

// Runs started in the same second with the same --out get distinct
// directories, each created by the run that uses it.
func TestNewRunDirConcurrent(t *testing.T) {
	parent := filepath.Join(t.TempDir(), "out")
	const n = 16
	dirs := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { dirs[i], errs[i] = NewRunDir(parent, "outage-date-retrylab-20260101-120000") })
	}
	wg.Wait()
	seen := map[string]bool{}
	for i, d := range dirs {
		if errs[i] != nil {
			t.Fatalf("NewRunDir: %v", errs[i])
		}
		if seen[d] {
			t.Fatalf("two runs got directory %s", d)
		}
		seen[d] = true
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			t.Errorf("%s is not a directory: %v", d, err)
		}
	}
	for _, want := range []string{"outage-date-retrylab-20260101-120000", "outage-date-retrylab-20260101-120000-2", "outage-date-retrylab-20260101-120000-16"} {
		if !seen[filepath.Join(parent, want)] {
			t.Errorf("no run got %s; got %v", want, dirs)
		}
	}
}

func TestNewRunDirParentIsFile(t *testing.T) {
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := NewRunDir(f, "x"); err == nil {
		t.Fatal("NewRunDir under a file succeeded")
	}
}

// RunInDir records into the run directory's timeline.ndjson and names it;
// it never writes over another run's file, and a file that cannot be
// written is a TimelineError naming it.
func TestRunInDir(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc := mustParse(t, "duration: 5s\nfleet: {clients: 2, requests: 2}\n")
		dir := t.TempDir()
		sum, err := RunInDir(context.Background(), sc, RunOptions{Virtual: true, Seed: 1}, dir, nil)
		path := filepath.Join(dir, TimelineFile)
		if err != nil || sum == nil || sum.TimelinePath != path {
			t.Fatalf("RunInDir = %+v, %v; want a summary naming %s", sum, err, path)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if d := decode(t, b); len(d.outs) != 4 || d.end == nil || int64(len(b)) != sum.TimelineBytes {
			t.Errorf("%s: %d outcomes, end %v, %d bytes (summary %d); want 4 outcomes, an end record, the bytes counted", path, len(d.outs), d.end, len(b), sum.TimelineBytes)
		}
		sum, err = RunInDir(context.Background(), sc, RunOptions{Virtual: true}, dir, nil)
		var ce *CreateError
		if sum != nil || !errors.As(err, &ce) || !errors.Is(err, fs.ErrExist) {
			t.Errorf("RunInDir into a used directory = %+v, %v; want a CreateError: the file exists", sum, err)
		}
	})
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	synctest.Test(t, func(t *testing.T) {
		sc := mustParse(t, "duration: 5s\nfleet: {clients: 2, requests: 2}\n")
		dir := t.TempDir()
		full := func(string) (*os.File, error) { return os.OpenFile("/dev/full", os.O_WRONLY, 0) }
		sum, err := RunInDir(context.Background(), sc, RunOptions{Virtual: true}, dir, full)
		var te *TimelineError
		if sum == nil || !errors.As(err, &te) || te.Path != filepath.Join(dir, TimelineFile) || !strings.HasPrefix(err.Error(), te.Path+": ") {
			t.Errorf("RunInDir onto a full disk = %+v, %v; want the summary and a TimelineError naming the file", sum, err)
		}
	})
}
