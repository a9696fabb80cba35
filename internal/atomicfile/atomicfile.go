// Package atomicfile writes files whole or not at all: through a temporary
// file in the destination's directory, renamed into place once complete.
package atomicfile

import (
	"io"
	"os"
	"path/filepath"
)

// Write writes path through a temporary file in the same directory (which
// must exist) and renames it into place, so a reader sees the old file or
// the whole new one and a failure leaves nothing half-written behind. The
// file's mode is 0644.
func Write(path string, write func(io.Writer) error) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	err = write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o644)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// WriteBytes writes b to path as Write does.
func WriteBytes(path string, b []byte) error {
	return Write(path, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

// WriteTo writes what src writes to path as Write does.
func WriteTo(path string, src io.WriterTo) error {
	return Write(path, func(w io.Writer) error {
		_, err := src.WriteTo(w)
		return err
	})
}
