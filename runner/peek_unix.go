//go:build unix

package runner

import (
	"bytes"
	"net"
	"syscall"
	"time"
)

// peekRequestLine returns the first line the peer sent on c without
// consuming it (MSG_PEEK), so that the connection can be handed to the
// stub untouched; "" when it cannot tell (c closed, not TCP, no full line
// within about a second of the first bytes).
func peekRequestLine(c net.Conn) string {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return ""
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return ""
	}
	buf := make([]byte, 512)
	for tries := 0; tries < 1000; tries++ {
		var n int
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			n, _, rerr = syscall.Recvfrom(int(fd), buf, syscall.MSG_PEEK)
			return rerr != syscall.EAGAIN && rerr != syscall.EWOULDBLOCK
		})
		if err != nil || rerr != nil || n == 0 {
			return ""
		}
		if i := bytes.IndexByte(buf[:n], '\n'); i >= 0 || n == len(buf) {
			return string(buf[:n])
		}
		// Part of the line: the rest is on its way.
		time.Sleep(time.Millisecond)
	}
	return ""
}
