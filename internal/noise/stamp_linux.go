package noise

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// sinceReceipt is how long ago, in ms (whole kernel ticks), c last
// received data; false when the kernel does not say.
func sinceReceipt(c net.Conn) (uint32, bool) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return 0, false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return 0, false
	}
	var (
		info *unix.TCPInfo
		ierr error
	)
	if err := raw.Control(func(fd uintptr) {
		info, ierr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil || ierr != nil {
		return 0, false
	}
	return info.Last_data_recv, true
}
