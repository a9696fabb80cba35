package runner

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
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
