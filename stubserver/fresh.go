package stubserver

import (
	"net"
	"net/http"
	"sync"
)

// FreshConns tracks an http.Server's connections that have not sent a
// request yet. http.Server.Shutdown waits 5 s for a connection opened but
// never used (a client's spare keep-alive connection); CloseAll closes
// them at once, and a connection opened once stopping is closed closes
// as it opens. The zero value is ready; it is safe for concurrent use.
type FreshConns struct {
	m sync.Map // net.Conn → struct{}
}

// Track is for http.Server.ConnState: it keeps c while it is new, and
// closes it when it opens after stopping was closed.
func (f *FreshConns) Track(c net.Conn, st http.ConnState, stopping <-chan struct{}) {
	switch st {
	case http.StateNew:
		f.m.Store(c, struct{}{})
		select {
		case <-stopping:
			c.Close()
		default:
		}
	case http.StateActive, http.StateHijacked, http.StateClosed:
		f.m.Delete(c)
	}
}

// CloseAll closes every connection that has not sent a request.
func (f *FreshConns) CloseAll() {
	f.m.Range(func(c, _ any) bool {
		c.(net.Conn).Close()
		return true
	})
}
