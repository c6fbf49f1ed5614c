package flightserver

import (
	"net"
	"sync"
	"time"
)

// Defaults of the connection limits; each has an Option.
const (
	// DefaultMaxConnectionIdle is how long a client connection may have no
	// RPC in progress before the server closes it (an HTTP/2 GOAWAY; gRPC
	// clients reconnect on their next call). A connection costs a file
	// descriptor and its buffers whether or not it ever makes a call, and
	// opening one needs no credentials.
	DefaultMaxConnectionIdle = 5 * time.Minute
	// DefaultMaxConnections is how many client connections the server
	// holds at once. A connection over it waits in the listen backlog
	// until one closes; the connections being served are not affected.
	DefaultMaxConnections = 4096
)

// WithMaxConnectionIdle sets how long a connection may go without an RPC
// in progress before the server closes it (default
// DefaultMaxConnectionIdle; 0: never).
func WithMaxConnectionIdle(d time.Duration) Option {
	return func(o *options) { o.maxConnIdle = d }
}

// WithMaxConnections sets how many connections the server holds at once
// (default DefaultMaxConnections; 0 or less: no limit). Serve accepts no
// further connection until one closes.
func WithMaxConnections(n int) Option { return func(o *options) { o.maxConns = n } }

// limitListener accepts at most cap(slots) connections at once (nil
// slots: no limit): Accept waits for one of them to close first.
// Connections over the limit wait in the kernel's listen backlog, unread.
// It counts the open connections for the metrics.
type limitListener struct {
	net.Listener
	slots chan struct{}
	m     *metrics
	wrap  func(net.Conn) net.Conn // applied to each accepted connection (nil: none)

	closeOnce sync.Once
	done      chan struct{}
}

// newLimitListener limits l to n connections at once (n <= 0: counts
// them only).
func newLimitListener(l net.Listener, n int, m *metrics) *limitListener {
	ll := &limitListener{Listener: l, m: m, done: make(chan struct{})}
	if n > 0 {
		ll.slots = make(chan struct{}, n)
	}
	return ll
}

// Accept waits for a free slot, then accepts a connection that holds it
// until it is closed.
func (l *limitListener) Accept() (net.Conn, error) {
	if l.slots == nil {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.m.conns.Inc()
		return &limitConn{Conn: l.wrapped(c), release: l.m.conns.Dec}, nil
	}
	select {
	case l.slots <- struct{}{}:
	default:
		l.m.connWaits.Inc()
		select {
		case l.slots <- struct{}{}:
		case <-l.done:
			return nil, net.ErrClosed
		}
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	l.m.conns.Inc()
	return &limitConn{Conn: l.wrapped(c), release: func() { l.m.conns.Dec(); <-l.slots }}, nil
}

func (l *limitListener) wrapped(c net.Conn) net.Conn {
	if l.wrap == nil {
		return c
	}
	return l.wrap(c)
}

// Close closes the listener and ends an Accept waiting for a slot.
func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// limitConn gives its listener's slot back when it is closed (once).
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
