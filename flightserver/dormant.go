package flightserver

import (
	"context"
	"errors"
	"net"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
)

// defaultDormantAfter is how long a data receive waits on a silent
// connection before it gives its reservation back (see recvConn).
const defaultDormantAfter = time.Second

// dormantSlack is how many bytes a connection may have delivered since a
// receive that watches the whole connection (see recvConn) started for it
// still to go dormant: the 17 bytes of a client's keepalive PING or of a
// WINDOW_UPDATE must not pin a paused put's reservation. So much of a message may be in memory for a
// dormant receive, besides what the stream window let in before it
// started.
const dormantSlack = 16 << 10

// withDormantAfter sets how long a receive waits on a silent connection
// before it goes dormant (0 or less: never), for tests.
func withDormantAfter(d time.Duration) Option { return func(o *options) { o.dormantAfter = d } }

// withRecvConnHook has f see each connection whose receives the server
// follows, for tests.
func withRecvConnHook(f func(*recvConn)) Option { return func(o *options) { o.onRecvConn = f } }

// recvConn watches the bytes a client connection delivers to grpc, so that
// a data receive (a DoPut or DoExchange RecvMsg) waiting for a client that
// sends nothing does not hold the largest message of the budget: red team
// round 23's x02, where four puts pausing between batches (slow producers)
// held the whole budget and every other put on the server was refused.
//
// grpc-go gives no hook between a message's 5-byte length prefix and its
// body (the stream's window opens to the whole message at once), nor any
// per-stream signal that data arrived, so a receive must hold the largest
// message whenever bytes of its stream may reach it. Bytes reach a stream
// only through its connection's Read, though, which is what this wraps;
// it follows the HTTP/2 frames there (h2Frames: below TLS on a plain
// connection, above it through dormantCreds) to tell which DATA frame
// payload is whose stream's:
//
//   - A receive that has waited dormantAfter while no DATA of its stream
//     arrived (so no more of a message has arrived for it since it started,
//     beyond what the 256 KiB stream window let in before) releases its
//     reservation: it is dormant. Other streams' traffic (reads on the same
//     client, control frames such as PING, SETTINGS, WINDOW_UPDATE or
//     PRIORITY) does not keep it awake: red team round 24's y01, where a
//     paused put whose client went on reading through its connection kept
//     its reservation, and four such held the whole budget.
//   - Before a Read hands bytes to grpc that carry DATA payload of a
//     dormant receive's stream, that receive takes its reservation back
//     (it is re-armed), waiting for room as a receive does. So the bytes of
//     a message are always covered, and a connection whose receives cannot
//     be re-armed stops being read (TCP pushes back on its client) rather
//     than its bytes going uncounted. After --inflight-wait the connection
//     is closed: its client sees UNAVAILABLE, as a receive refused for the
//     same reason sees RESOURCE_EXHAUSTED. A re-armed receive holds its
//     reservation until it returns (part of a message is in memory).
//   - Where the frames cannot be followed (the connection does not speak
//     HTTP/2 as grpc-go expects, or the receive's stream id is unknown:
//     see transportStreamID), a receive falls back to watching the whole
//     connection: it goes dormant only while the connection delivered no
//     more than dormantSlack bytes since it started, and any byte the
//     connection delivers re-arms it.
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

	// above is set when the frames are followed above a TLS layer
	// (dormantCreds): the Reads of this, under it, pass through.
	above atomic.Bool
	// frames follows what the connection's reader delivers (one reader
	// at a time: the TLS handshake, then grpc's reader).
	frames h2Frames

	mu         sync.Mutex
	delivered  uint64 // bytes Reads delivered
	lost       bool   // frames lost track: every receive watches the whole connection
	maxOpened  uint32 // frames.maxOpened as of the last Read
	delivering bool   // a Read is re-arming before it delivers bytes
	pending    int    // data receives in progress
	dormant    map[*inflightStream]struct{}
	watch      map[uint32]*inflightStream // receives in progress by stream id (those with one)
	changed    chan struct{}              // closed (and replaced) when dormant shrinks
	wake       func()                     // ends the re-arm's current wait
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
		dormant: map[*inflightStream]struct{}{}, watch: map[uint32]*inflightStream{}, changed: make(chan struct{})}
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

// Read implements net.Conn: bytes of a dormant receive's stream are handed
// over only once it holds its reservation again.
func (c *recvConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && !c.above.Load() {
		if aerr := c.arrive(p[:n]); aerr != nil {
			return 0, aerr
		}
	}
	return n, err
}

// dormantCreds are TLS credentials under which a recvConn follows the
// HTTP/2 frames above the TLS layer (below it, they are ciphertext): the
// connection grpc reads after the handshake is a plainConn.
type dormantCreds struct {
	credentials.TransportCredentials
}

// ServerHandshake implements credentials.TransportCredentials.
func (d dormantCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	a, ok := raw.RemoteAddr().(*connAddr)
	if !ok { // not a connection Serve watches
		return d.TransportCredentials.ServerHandshake(raw)
	}
	a.c.above.Store(true)
	conn, info, err := d.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		return conn, info, err
	}
	return &plainConn{Conn: conn, c: a.c}, info, nil
}

// Clone implements credentials.TransportCredentials.
func (d dormantCreds) Clone() credentials.TransportCredentials {
	return dormantCreds{d.TransportCredentials.Clone()}
}

// plainConn is the TLS connection over a recvConn: its Reads are what the
// recvConn follows and holds back (see recvConn.Read).
type plainConn struct {
	net.Conn
	c *recvConn
}

// Read implements net.Conn.
func (p *plainConn) Read(b []byte) (int, error) {
	n, err := p.Conn.Read(b)
	if n > 0 {
		if aerr := p.c.arrive(b[:n]); aerr != nil {
			return 0, aerr
		}
	}
	return n, err
}

// errConnBusy ends a connection whose dormant receives found no room in
// the budget within --inflight-wait after its client sent more.
var errConnBusy = errors.New("server busy: a paused put's connection sent more, and the in-flight budget had no room for it")

// arrive runs before a Read delivers b.
func (c *recvConn) arrive(b []byte) error {
	lost := c.frames.feed(b)
	runs := c.frames.runs
	c.mu.Lock()
	c.lost = c.lost || lost
	c.maxOpened = c.frames.maxOpened
	if len(c.woken(runs)) == 0 {
		c.countLocked(len(b), runs)
		c.mu.Unlock()
		return nil
	}
	c.delivering = true
	c.mu.Unlock()
	err := c.rearm(runs)
	c.mu.Lock()
	c.delivering = false
	c.countLocked(len(b), runs)
	c.mu.Unlock()
	return err
}

// countLocked counts n bytes delivered, runs of which DATA payload.
func (c *recvConn) countLocked(n int, runs []dataRun) {
	c.delivered += uint64(n)
	for _, r := range runs {
		if w := c.watch[r.sid]; w != nil {
			w.got += uint64(r.n)
		}
	}
}

// woken lists (under mu) the dormant receives that bytes with DATA payload
// runs wake: those of the runs' streams, and all that watch the whole
// connection.
func (c *recvConn) woken(runs []dataRun) []*inflightStream {
	if len(c.dormant) == 0 {
		return nil
	}
	var ws []*inflightStream
	for w := range c.dormant {
		if c.lost || w.sid == 0 {
			ws = append(ws, w)
		}
	}
	if c.lost {
		return ws
	}
	for _, r := range runs {
		if w := c.watch[r.sid]; w != nil && w.state == recvDormant && !slices.Contains(ws, w) {
			ws = append(ws, w)
		}
	}
	return ws
}

// rearm gives the dormant receives that runs wake their reservations back,
// waiting for room up to the budget's wait. No receive goes dormant
// meanwhile (delivering); one that ends does not need it any more, so a
// wait starts over when the dormant set shrinks.
func (c *recvConn) rearm(runs []dataRun) error {
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
		ws := c.woken(runs)
		if len(ws) == 0 {
			c.mu.Unlock()
			return nil
		}
		need := int64(len(ws)) * c.reserve
		if b.sem.TryAcquire(need) {
			c.armLocked(ws)
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
		ws = c.woken(runs) // no more than before: none went dormant
		armed := int64(len(ws)) * c.reserve
		c.armLocked(ws)
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

// armLocked marks the dormant receives ws as holding their reservations.
// One that watches its stream holds it until it returns (DATA of its
// stream arrived, so part of a message is in memory); one that watches the
// whole connection may go dormant again if what arrives is not its message
// (sleep).
func (c *recvConn) armLocked(ws []*inflightStream) {
	for _, w := range ws {
		w.state = recvArmed
		w.timer = time.AfterFunc(c.after, func() { c.sleep(w) })
		delete(c.dormant, w)
		c.b.m.dormant.Dec()
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
	if !w.sidKnown {
		w.sid, w.sidKnown = c.streamIDLocked(ctx), true
	}
	c.mu.Unlock()
	return nil
}

// streamIDLocked is the HTTP/2 stream id of the stream whose context is
// ctx, if the frames of its connection are followed and name it; 0 if not
// (its receives then watch the whole connection).
func (c *recvConn) streamIDLocked(ctx context.Context) uint32 {
	id := transportStreamID(grpc.ServerTransportStreamFromContext(ctx))
	// The HEADERS frame that opened the stream was read (through arrive)
	// before grpc started it: an id it did not name is not one.
	if c.lost || id%2 == 0 || id > c.maxOpened {
		return 0
	}
	return id
}

// transportStreamID is the HTTP/2 stream id of a grpc-go server stream, 0
// if it cannot be had. grpc-go does not expose it: the ServerTransportStream
// in a handler's context is a *transport.ServerStream, whose id is an
// unexported field, read here by reflection (reading, not setting, an
// unexported field is allowed), checked by package, type, name and kind so
// that a grpc-go that changes it yields 0 (the whole-connection fallback)
// rather than a wrong id; the dormancy tests fail then. The alternatives
// are not sound: grpc-go's stats.Handler reports no stream id, and pairing
// the HEADERS frames seen on the connection with the handlers that start
// fails when grpc-go refuses a stream without starting a handler (too many
// streams, bad headers, draining) — and starts handlers on goroutines of
// their own, in no fixed order.
func transportStreamID(s grpc.ServerTransportStream) uint32 {
	if s == nil {
		return 0
	}
	v := reflect.ValueOf(s)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return 0
	}
	v = v.Elem()
	if t := v.Type(); t.Kind() != reflect.Struct || t.Name() != "ServerStream" ||
		t.PkgPath() != "google.golang.org/grpc/internal/transport" {
		return 0
	}
	f := v.FieldByName("id")
	if !f.IsValid() || f.Kind() != reflect.Uint32 {
		return 0
	}
	return uint32(f.Uint())
}

// start records that w holds its reservation and waits for its client
// from now on; after dormantAfter of silence it goes dormant.
func (c *recvConn) start(w *inflightStream) {
	c.mu.Lock()
	w.state = recvArmed
	w.from = c.delivered
	w.got = 0
	if w.sid != 0 {
		c.watch[w.sid] = w
	}
	if c.after > 0 {
		w.timer = time.AfterFunc(c.after, func() { c.sleep(w) })
	}
	c.mu.Unlock()
}

// sleep releases w's reservation if no DATA of its stream arrived since
// its receive started (watching the whole connection: if next to nothing
// arrived on it). It tries again later if a Read is re-arming others, or
// the connection has more receives under way than re-arming would fit in
// the budget.
func (c *recvConn) sleep(w *inflightStream) {
	c.mu.Lock()
	if w.state != recvArmed || c.arrivedLocked(w) {
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
	c.b.m.dormant.Inc()
	c.mu.Unlock()
	c.b.release(c.reserve)
}

// arrivedLocked reports whether part of a message may have arrived for w's
// receive since it started.
func (c *recvConn) arrivedLocked(w *inflightStream) bool {
	if c.lost || w.sid == 0 {
		return c.delivered-w.from > dormantSlack
	}
	return w.got > 0
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
	if w.sid != 0 && c.watch[w.sid] == w {
		delete(c.watch, w.sid)
	}
	holds = w.state == recvArmed
	if w.state == recvDormant {
		delete(c.dormant, w)
		c.b.m.dormant.Dec()
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
