package flightserver

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// defaultDormantAfter is how long a data receive waits on a silent
// connection before it gives its reservation back (see recvConn).
const defaultDormantAfter = time.Second

// dormantSlack is how many bytes a connection may have delivered since a
// receive started for it still to go dormant: the 17 bytes of a client's
// keepalive PING (a few more under TLS) or of a WINDOW_UPDATE must not pin
// a paused put's reservation. So much of a message may be in memory for a
// dormant receive, besides what the stream window let in before it
// started.
const dormantSlack = 16 << 10

// withDormantAfter sets how long a receive waits on a silent connection
// before it goes dormant (0 or less: never), for tests.
func withDormantAfter(d time.Duration) Option { return func(o *options) { o.dormantAfter = d } }

// recvConn watches the bytes a client connection delivers to grpc, so that
// a data receive (a DoPut or DoExchange RecvMsg) waiting for a client that
// sends nothing does not hold the largest message of the budget: red team
// round 23's x02, where four puts pausing between batches (slow producers)
// held the whole budget and every other put on the server was refused.
//
// grpc-go gives no hook between a message's 5-byte length prefix and its
// body (the stream's window opens to the whole message at once), nor any
// per-stream signal that data arrived, so a receive must hold the largest
// message whenever bytes may reach it. Bytes reach a stream only through its
// connection's Read, though, which is what this wraps:
//
//   - A receive that has waited dormantAfter while its connection delivered
//     no more than dormantSlack bytes (so no more of a message has arrived
//     for it since it started, beyond what the 256 KiB stream window let in
//     before) releases its reservation: it is dormant.
//   - Before a Read hands bytes to grpc, every dormant receive of that
//     connection takes its reservation back (they are re-armed, all at once,
//     since nothing tells which stream the bytes are for), waiting for room
//     as a receive does. So the bytes of a message are always covered, and
//     a connection whose receives cannot be re-armed stops being read (TCP
//     pushes back on its client) rather than its bytes going uncounted.
//     After --inflight-wait the connection is closed: its client sees
//     UNAVAILABLE, as a receive refused for the same reason sees
//     RESOURCE_EXHAUSTED.
//   - A re-armed receive goes dormant again after dormantAfter if its
//     connection still delivered no more than dormantSlack bytes since the
//     receive started (a keepalive ping); one whose connection delivered
//     more holds its reservation until it returns (a message may be partly
//     in memory).
//   - A connection with a dormant receive has at most budget / max-recv
//     receives in progress (a further one waits, as it would for room), so
//     re-arming never needs more than the budget less what that
//     connection's other receives hold.
//
// The receive's handler and its connection's reader are different
// goroutines; the state below is shared under mu.
type recvConn struct {
	net.Conn
	addr    *connAddr
	b       *budget
	reserve int64         // what a receive reserves: min(max-recv, budget)
	after   time.Duration // dormantAfter
	closed  chan struct{}
	once    sync.Once

	mu         sync.Mutex
	delivered  uint64 // bytes Reads delivered
	delivering bool   // a Read is re-arming before it delivers bytes
	pending    int    // data receives in progress
	dormant    map[*inflightStream]struct{}
	changed    chan struct{} // closed (and replaced) when dormant shrinks
	wake       func()        // ends the re-arm's current wait
}

// connAddr is the remote address of a recvConn: what grpc reports as the
// peer's address, by which a stream finds its connection. Its String is
// the address's own.
type connAddr struct {
	net.Addr
	c *recvConn
}

func newRecvConn(c net.Conn, b *budget, reserve int64, after time.Duration) *recvConn {
	rc := &recvConn{Conn: c, b: b, reserve: reserve, after: after, closed: make(chan struct{}),
		dormant: map[*inflightStream]struct{}{}, changed: make(chan struct{})}
	rc.addr = &connAddr{Addr: c.RemoteAddr(), c: rc}
	return rc
}

// RemoteAddr implements net.Conn.
func (c *recvConn) RemoteAddr() net.Addr { return c.addr }

// Close implements net.Conn; it ends a re-arm waiting for room.
func (c *recvConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// Read implements net.Conn: bytes are handed over only once the
// connection's dormant receives hold their reservations again.
func (c *recvConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		if aerr := c.arrive(n); aerr != nil {
			return 0, aerr
		}
	}
	return n, err
}

// errConnBusy ends a connection whose dormant receives found no room in
// the budget within --inflight-wait after its client sent more.
var errConnBusy = errors.New("server busy: a paused put's connection sent more, and the in-flight budget had no room for it")

// arrive runs before a Read delivers n bytes.
func (c *recvConn) arrive(n int) error {
	c.mu.Lock()
	if len(c.dormant) == 0 {
		c.delivered += uint64(n)
		c.mu.Unlock()
		return nil
	}
	c.delivering = true
	c.mu.Unlock()
	err := c.rearm()
	c.mu.Lock()
	c.delivering = false
	c.delivered += uint64(n)
	c.mu.Unlock()
	return err
}

// rearm gives every dormant receive its reservation back, waiting for room
// up to the budget's wait. No receive goes dormant meanwhile (delivering);
// one that ends does not need it any more, so a wait starts over when the
// dormant set shrinks.
func (c *recvConn) rearm() error {
	b := c.b
	var deadline <-chan time.Time
	if b.wait > 0 {
		t := time.NewTimer(b.wait)
		defer t.Stop()
		deadline = t.C
	}
	waited := false
	for {
		c.mu.Lock()
		k := int64(len(c.dormant))
		if k == 0 {
			c.mu.Unlock()
			return nil
		}
		need := k * c.reserve
		if b.sem.TryAcquire(need) {
			c.armAllLocked()
			c.mu.Unlock()
			b.add(need)
			return nil
		}
		ctx, cancel := context.WithCancel(context.Background())
		c.wake = cancel
		c.mu.Unlock()
		if !waited {
			b.m.inflightWaits.WithLabelValues(b.pool).Inc()
			waited = true
		}
		got := make(chan error, 1)
		go func() { got <- b.sem.Acquire(ctx, need) }()
		var err error
		select {
		case err = <-got:
		case <-deadline:
			cancel()
			if err = <-got; err != nil {
				c.clearWake()
				b.m.inflightRefusals.WithLabelValues(b.pool).Inc()
				return errConnBusy
			}
		case <-c.closed:
			cancel()
			if err = <-got; err != nil {
				c.clearWake()
				return net.ErrClosed
			}
		}
		cancel()
		c.mu.Lock()
		c.wake = nil
		if err != nil { // woken: the dormant set shrank
			c.mu.Unlock()
			continue
		}
		armed := int64(len(c.dormant)) * c.reserve // no more than need: none went dormant
		c.armAllLocked()
		c.mu.Unlock()
		b.add(armed)
		if need > armed {
			b.sem.Release(need - armed)
		}
		return nil
	}
}

func (c *recvConn) clearWake() {
	c.mu.Lock()
	c.wake = nil
	c.mu.Unlock()
}

// armAllLocked marks every dormant receive as holding its reservation;
// each may go dormant again if what arrives is not its message (sleep).
func (c *recvConn) armAllLocked() {
	for w := range c.dormant {
		w.state = recvArmed
		w.timer = time.AfterFunc(c.after, func() { c.sleep(w) })
		delete(c.dormant, w)
	}
	c.changedLocked()
}

func (c *recvConn) changedLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
	if c.wake != nil {
		c.wake()
	}
}

// begin counts a receive of w in. While the connection has a dormant
// receive, it may have at most budget / reserve receives in progress (so
// that re-arming them fits in the budget); a receive over that waits, up
// to the budget's wait, for the dormant ones to be re-armed or to end.
func (c *recvConn) begin(ctx context.Context, w *inflightStream) error {
	var deadline <-chan time.Time
	c.mu.Lock()
	for len(c.dormant) > 0 && int64(c.pending+1)*c.reserve > c.b.capacity {
		ch := c.changed
		c.mu.Unlock()
		if deadline == nil && c.b.wait > 0 {
			t := time.NewTimer(c.b.wait)
			defer t.Stop()
			deadline = t.C
			c.b.m.inflightWaits.WithLabelValues(c.b.pool).Inc()
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-deadline:
			c.b.m.inflightRefusals.WithLabelValues(c.b.pool).Inc()
			return status.Errorf(codes.ResourceExhausted,
				"server busy: inbound messages in flight fill the server's budget of %d bytes (%s) and none finished within %s; retry later",
				c.b.capacity, c.b.flag, c.b.wait)
		}
		c.mu.Lock()
	}
	c.pending++
	c.mu.Unlock()
	return nil
}

// start records that w holds its reservation and waits for its client
// from now on; after dormantAfter of silence it goes dormant.
func (c *recvConn) start(w *inflightStream) {
	c.mu.Lock()
	w.state = recvArmed
	w.from = c.delivered
	if c.after > 0 {
		w.timer = time.AfterFunc(c.after, func() { c.sleep(w) })
	}
	c.mu.Unlock()
}

// sleep releases w's reservation if next to nothing arrived on the
// connection since its receive started. It tries again later if a Read is
// re-arming others, or the connection has more receives under way than
// re-arming would fit in the budget.
func (c *recvConn) sleep(w *inflightStream) {
	c.mu.Lock()
	if w.state != recvArmed || c.delivered-w.from > dormantSlack {
		c.mu.Unlock()
		return
	}
	if c.delivering || int64(c.pending)*c.reserve > c.b.capacity {
		w.timer = time.AfterFunc(c.after, func() { c.sleep(w) })
		c.mu.Unlock()
		return
	}
	w.state = recvDormant
	c.dormant[w] = struct{}{}
	c.mu.Unlock()
	c.b.release(c.reserve)
}

// finish counts w's receive out (it returned, or never started: abort)
// and reports whether it still holds its reservation.
func (c *recvConn) finish(w *inflightStream) (holds bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	c.pending--
	holds = w.state == recvArmed
	if w.state == recvDormant {
		delete(c.dormant, w)
		c.changedLocked()
	}
	w.state = recvIdle
	return holds
}

// The states of a stream's receive.
const (
	recvIdle    = iota // no receive in progress (or one without a reservation yet)
	recvArmed          // holds the largest message
	recvDormant        // waits on a silent connection, holding nothing
)
