//go:build !linux

package noise

import (
	"net"
	"time"
)

// connStamp: only Linux says how long ago a socket received data.
type connStamp struct{}

func newConnStamp(net.Conn) *connStamp { return nil }

func (*connStamp) sinceReceipt(time.Time, uint32) (uint32, bool) { return 0, false }

func (*connStamp) answer(time.Time) {}
