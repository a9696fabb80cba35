package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
)

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
	return "", fmt.Errorf("scenarios: %s: %d run directories named %s already exist", parent, maxRunDirSuffix, name)
}
