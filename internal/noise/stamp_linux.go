package noise

import (
	"net"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// connStamp asks the kernel how long ago a connection last received
// data. It is made once per connection, so that a reading allocates
// nothing; nil for a connection that is not a socket.
type connStamp struct {
	raw syscall.RawConn
	mu  sync.Mutex // guards the rest: one reading at a time
	// read is Control's function, bound once: it fills info (n bytes).
	read func(fd uintptr)
	info unix.TCPInfo
	n    uint32
	err  syscall.Errno
	// answered is when the connection's last request was answered
	// (zero: none yet).
	answered time.Time
}

// lastDataRecvEnd is how much of a tcp_info the reading needs.
const lastDataRecvEnd = uint32(unsafe.Offsetof(unix.TCPInfo{}.Last_data_recv) + unsafe.Sizeof(unix.TCPInfo{}.Last_data_recv))

func newConnStamp(c net.Conn) *connStamp {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	cs := &connStamp{raw: raw}
	cs.read = func(fd uintptr) {
		cs.n = lastDataRecvEnd
		_, _, cs.err = syscall.Syscall6(syscall.SYS_GETSOCKOPT, fd, syscall.IPPROTO_TCP, syscall.TCP_INFO,
			uintptr(unsafe.Pointer(&cs.info)), uintptr(unsafe.Pointer(&cs.n)), 0)
	}
	return cs
}

// sinceReceipt is how long before at, in ms (whole kernel ticks), the
// connection last received data; false when the kernel does not say. It
// is 0, unasked, when the last answer on the connection came less than
// tick (ms; 0: unknown) before at: the data came after it.
func (cs *connStamp) sinceReceipt(at time.Time, tick uint32) (uint32, bool) {
	if cs == nil {
		return 0, false
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if tick > 0 && !cs.answered.IsZero() && at.Sub(cs.answered) < time.Duration(tick)*time.Millisecond {
		return 0, true
	}
	if err := cs.raw.Control(cs.read); err != nil || cs.err != 0 || cs.n < lastDataRecvEnd {
		return 0, false
	}
	return cs.info.Last_data_recv, true
}

// answer notes the connection's request answered at at.
func (cs *connStamp) answer(at time.Time) {
	if cs == nil {
		return
	}
	cs.mu.Lock()
	cs.answered = at
	cs.mu.Unlock()
}
