//go:build !unix

package subjects

import "os/exec"

// ownProcessGroup is a no-op where process groups do not exist: the
// program alone is killed at the deadline.
func ownProcessGroup(cmd *exec.Cmd) {}
