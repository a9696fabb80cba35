//go:build unix

package runner

import (
	"bytes"
	"net"
	"syscall"
	"time"
)

// maxPeek bounds the request head peekHead returns: the request line and
// the headers that identify a client come first in any client's request.
const maxPeek = 8 << 10

// peekHead returns the head of the first request the peer sent on c (its
// request line and headers, up to the blank line, at most maxPeek bytes)
// without consuming it (MSG_PEEK), so that the connection can be handed
// to the stub untouched; nil when it cannot tell (c closed, not TCP, no
// whole head within about a second of the first bytes).
func peekHead(c net.Conn) []byte {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	buf := make([]byte, maxPeek)
	for tries := 0; tries < 1000; tries++ {
		var n int
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			n, _, rerr = syscall.Recvfrom(int(fd), buf, syscall.MSG_PEEK)
			return rerr != syscall.EAGAIN && rerr != syscall.EWOULDBLOCK
		})
		if err != nil || rerr != nil || n == 0 {
			return nil
		}
		if bytes.HasPrefix(buf[:n], h2Preface) {
			// HTTP/2 (a gRPC program): its head is the first HEADERS
			// frame, whole.
			if _, whole := h2Head(buf[:n]); whole || n == len(buf) {
				return buf[:n]
			}
		} else if n == len(buf) || bytes.Contains(buf[:n], []byte("\r\n\r\n")) || bytes.Contains(buf[:n], []byte("\n\n")) {
			return buf[:n]
		}
		// Part of the head: the rest is on its way.
		time.Sleep(time.Millisecond)
	}
	return nil
}
