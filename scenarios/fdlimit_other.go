//go:build !unix

package scenarios

// openFileLimit is unknown here.
func openFileLimit() int { return 0 }
