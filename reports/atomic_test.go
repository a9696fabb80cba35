package reports

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type failingWriterTo struct{ err error }

func (f failingWriterTo) WriteTo(w io.Writer) (int64, error) {
	n, _ := io.WriteString(w, "half a plot")
	return int64(n), f.err
}

// A plot whose encoding fails midway leaves neither a half-written file
// nor a temporary one, and the error names the file.
func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "timeline.png")
	boom := errors.New("no space left on device")
	err := writeFile(path, failingWriterTo{boom})
	if !errors.Is(err, boom) {
		t.Fatalf("writeFile error %v, want %v", err, boom)
	}
	if want := "timeline.png"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not name %s", err, want)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("directory holds %d entries after a failed write, want none", len(ents))
	}
}
