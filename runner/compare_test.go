package runner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"testing/synctest"

	"github.com/retrylab/retrylab/subjects"
)

// Compare runs every subject with every seed, in order, each into its own
// directory under the comparison's, never detached; Each's error stops it,
// and a comparison interrupted before any run says so.
func TestCompare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc := mustParse(t, "duration: 5s\nfleet: {clients: 2, requests: 1}\n")
		dir := filepath.Join(t.TempDir(), "compare-x")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		subjs := []subjects.Subject{mustSubject(t, "retrylab"), mustSubject(t, "no-retry")}
		var setup, each []string
		runs, err := Compare(context.Background(), sc, CompareOptions{
			Subjects: subjs, Names: []string{"ours", "exec:a b"}, Seeds: 2, Dir: dir,
			Run: RunOptions{Virtual: true, Seed: 7, Detach: true},
			Setup: func(r *CompareRun, ro *RunOptions) (func(), error) {
				if ro.Detach || ro.Seed != r.Seed || ro.Subject != r.Subject || !ro.Virtual {
					t.Errorf("run %s seed %d: options %+v; want its subject and seed, virtual, not detached", r.Name, r.Seed, ro)
				}
				setup = append(setup, r.ID)
				return nil, nil
			},
			Each: func(r *CompareRun, err error) error {
				if err != nil || r.Summary == nil || r.Summary.Seed != r.Seed || r.Summary.TimelinePath != filepath.Join(r.Dir, TimelineFile) {
					t.Errorf("run %s seed %d: %+v, %v", r.Name, r.Seed, r.Summary, err)
				}
				each = append(each, r.ID)
				return nil
			},
		})
		want := []string{"compare-x/ours-seed7", "compare-x/ours-seed8", "compare-x/exec_a_b-seed7", "compare-x/exec_a_b-seed8"}
		if err != nil || len(runs) != 4 || !reflect.DeepEqual(setup, want) || !reflect.DeepEqual(each, want) {
			t.Fatalf("Compare = %d runs, %v; setup %v, each %v; want %v", len(runs), err, setup, each, want)
		}
		for i, r := range runs {
			if r.ID != want[i] || r.Dir != filepath.Join(filepath.Dir(dir), want[i]) || r.Subject != subjs[i/2] {
				t.Errorf("run %d = %+v; want %s", i, r, want[i])
			}
		}

		stop := errors.New("stop")
		n := 0
		runs, err = Compare(context.Background(), sc, CompareOptions{Subjects: subjs, Seeds: 2, Dir: dir, Run: RunOptions{Virtual: true},
			Each: func(*CompareRun, error) error { n++; return stop }})
		if !errors.Is(err, stop) || n != 1 || len(runs) != 0 {
			t.Errorf("Compare with Each failing = %d runs, %v after %d; want it stopped at once with Each's error", len(runs), err, n)
		}

		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if runs, err := Compare(ctx, sc, CompareOptions{Subjects: subjs, Seeds: 1, Dir: dir, Run: RunOptions{Virtual: true}}); !errors.Is(err, ErrCompareInterrupted) || runs != nil {
			t.Errorf("Compare after ctx ended = %v, %v; want ErrCompareInterrupted", runs, err)
		}
	})
}
