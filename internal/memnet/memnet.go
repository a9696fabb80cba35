// Package memnet owns an in-memory network of listeners and buffered
// connections, so a real http.Server and http.Transport can talk inside a
// testing/synctest bubble where every wait uses the bubble's clock.
package memnet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
)

// ErrRefused is returned by DialContext when no listener has the address, or
// it was closed.
var ErrRefused = errors.New("memnet: connection refused")

// Network is a set of in-memory listeners reachable by address.
//
// The zero value is ready to use, and so is New's. A Network creates no
// channel or timer until Listen or DialContext is called, so one made
// outside a synctest bubble may be used inside it (but only inside one bubble
// at a time: listeners and connections belong to the bubble that made them).
// Its methods are safe for concurrent use.
type Network struct {
	mu        sync.Mutex
	listeners map[string]*listener
	nextL     int // listeners made, for addresses
	nextC     int // connections dialed, for client ports
	closed    bool
}

// New returns an empty network.
func New() *Network { return &Network{} }

// Listen returns a new listener. Its address is "memN:80" (N from 1), so
// "http://"+l.Addr().String() is a base URL a transport dialing through
// DialContext reaches. Closing the listener frees the address; closing the
// Network closes every listener.
//
// Listen panics if the Network is closed: that is a bug in the caller.
func (n *Network) Listen() net.Listener {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		panic("memnet: Listen on a closed Network")
	}
	if n.listeners == nil {
		n.listeners = make(map[string]*listener)
	}
	n.nextL++
	l := &listener{
		net:    n,
		addr:   Addr{Host: "mem" + strconv.Itoa(n.nextL), Port: 80},
		accept: make(chan net.Conn),
		done:   make(chan struct{}),
	}
	n.listeners[l.addr.String()] = l
	return l
}

// DialContext connects to the listener at addr (the network name is
// ignored: "tcp" is what http.Transport passes). It blocks until the
// listener accepts, the listener closes, or ctx ends. Its signature fits
// http.Transport.DialContext.
//
// The connection buffers up to 64 KiB each way; deadlines work as net.Conn
// documents, timing out with os.ErrDeadlineExceeded.
func (n *Network) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	n.mu.Lock()
	l := n.listeners[addr]
	n.nextC++
	port := n.nextC
	n.mu.Unlock()
	opErr := func(err error) error {
		return &net.OpError{Op: "dial", Net: "memnet", Addr: Addr{Host: addr}, Err: err}
	}
	if l == nil {
		return nil, opErr(fmt.Errorf("%w: no listener at %q", ErrRefused, addr))
	}
	if err := ctx.Err(); err != nil {
		return nil, opErr(err)
	}
	client := Addr{Host: "127.0.0.1", Port: port}
	c, s := Pipe(client, l.addr)
	select {
	case l.accept <- s:
		return c, nil
	case <-l.done:
		return nil, opErr(fmt.Errorf("%w: listener %q closed", ErrRefused, addr))
	case <-ctx.Done():
		return nil, opErr(ctx.Err())
	}
}

// Close closes every listener. Connections already made stay open until
// their ends are closed. Listen after Close panics; DialContext fails with
// ErrRefused.
func (n *Network) Close() error {
	n.mu.Lock()
	ls := n.listeners
	n.listeners = nil
	n.closed = true
	n.mu.Unlock()
	for _, l := range ls {
		l.close()
	}
	return nil
}

// Addr is the address of a listener ("memN:80") or a dialing end
// ("127.0.0.1:N", one port per connection, so servers can tell clients
// apart the way they would on loopback).
type Addr struct {
	Host string
	Port int
}

// Network returns "memnet".
func (Addr) Network() string { return "memnet" }

func (a Addr) String() string { return net.JoinHostPort(a.Host, strconv.Itoa(a.Port)) }

type listener struct {
	net    *Network
	addr   Addr
	accept chan net.Conn
	done   chan struct{}
	once   sync.Once
}

func (l *listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.accept:
		return c, nil
	case <-l.done:
		return nil, &net.OpError{Op: "accept", Net: "memnet", Addr: l.addr, Err: net.ErrClosed}
	}
}

func (l *listener) Close() error {
	l.net.mu.Lock()
	if l.net.listeners[l.addr.String()] == l {
		delete(l.net.listeners, l.addr.String())
	}
	l.net.mu.Unlock()
	l.close()
	return nil
}

func (l *listener) close() { l.once.Do(func() { close(l.done) }) }

func (l *listener) Addr() net.Addr { return l.addr }
