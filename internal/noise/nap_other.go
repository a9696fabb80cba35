//go:build !linux

package noise

import "time"

// nap sleeps d. Outside Linux it is a Go timer's sleep, whose lateness
// also holds the timer's delay.
func nap(d time.Duration) bool {
	time.Sleep(d)
	return true
}
