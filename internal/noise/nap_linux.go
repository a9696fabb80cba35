package noise

import (
	"syscall"
	"time"
)

// nap sleeps d in the kernel (nanosleep) on the calling thread, with no
// Go timer between: false when a signal cut it short.
func nap(d time.Duration) bool {
	ts := syscall.NsecToTimespec(int64(d))
	return syscall.Nanosleep(&ts, nil) == nil
}
