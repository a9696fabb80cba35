//go:build !unix

package runner

import "net"

// peekRequestLine cannot peek here: readiness then comes from the ready
// line, the process's exit, or the barrier's timeout.
func peekRequestLine(net.Conn) string { return "" }
