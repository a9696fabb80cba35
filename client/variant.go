package client

import "github.com/retrylab/retrylab/client/internal/variant"

// A negative control's departures (package clientcontrol) reach a
// Transport through variant.Set, so that this package exports no hook.
func init() {
	variant.Set = func(t any, v variant.Variant) { t.(*Transport).v = v }
}
