package flightserver

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/quiverdb/quiver/internal/quivertest"
)

// gateConn is a client connection whose writes can be stopped after a
// number of bytes: a client that pauses in the middle of a message.
type gateConn struct {
	net.Conn
	wmu     sync.Mutex // held by a write to the connection
	mu      sync.Mutex
	left    int64 // bytes still let through; < 0: all
	open    chan struct{}
	closed  chan struct{}
	closeMu sync.Once
}

func (g *gateConn) Write(p []byte) (int, error) {
	g.mu.Lock()
	left, open := g.left, g.open
	if left >= 0 {
		g.left = max(0, left-int64(len(p)))
	}
	g.mu.Unlock()
	g.wmu.Lock()
	defer g.wmu.Unlock()
	if left < 0 || int64(len(p)) <= left {
		return g.Conn.Write(p)
	}
	n, err := g.Conn.Write(p[:left])
	if err != nil {
		return n, err
	}
	select {
	case <-open:
	case <-g.closed:
		return n, net.ErrClosed
	}
	m, err := g.Conn.Write(p[left:])
	return n + m, err
}

// ping writes an HTTP/2 PING frame of its own (a keepalive's), between
// the client's writes.
func (g *gateConn) ping() error {
	g.wmu.Lock()
	defer g.wmu.Unlock()
	_, err := g.Conn.Write([]byte{0, 0, 8, 6, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8})
	return err
}

func (g *gateConn) Close() error {
	g.closeMu.Do(func() { close(g.closed) })
	return g.Conn.Close()
}

// stopAfter lets n more bytes through, then holds writes until the
// connection closes.
func (g *gateConn) stopAfter(n int64) {
	g.mu.Lock()
	g.left, g.open = n, make(chan struct{})
	g.mu.Unlock()
}

// dialGated is a client on a connection of its own, with its gate.
func dialGated(t *testing.T, addr string, opts ...grpc.DialOption) (flight.Client, *gateConn) {
	t.Helper()
	gc := make(chan *gateConn, 1)
	c := quivertest.MustDial(t, addr, append(opts, grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", a)
		if err != nil {
			return nil, err
		}
		g := &gateConn{Conn: conn, left: -1, open: make(chan struct{}), closed: make(chan struct{})}
		select {
		case gc <- g:
		default:
		}
		return g, nil
	}))...)
	// Connect now, so that the gate is known.
	if _, err := c.ListFlights(context.Background(), &flight.Criteria{}); err != nil {
		t.Fatal(err)
	}
	return c, <-gc
}

// pausedPut is a DoPut that has sent a batch and waits before its next.
type pausedPut struct {
	stream flight.FlightService_DoPutClient
	w      *flight.Writer
	cancel context.CancelFunc
	gate   *gateConn // set by stallMidMessage
}

// abort ends the put: its client cancels it and, as its stopped writes
// would hold the cancellation back, drops its connection.
func (p *pausedPut) abort() {
	p.cancel()
	if p.gate != nil {
		p.gate.Close()
	}
}

func startPausedPut(t *testing.T, c flight.Client, path string, rec arrow.RecordBatch) *pausedPut {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := c.DoPut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(rec.Schema()))
	w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{path}})
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	return &pausedPut{stream: stream, w: w, cancel: cancel}
}

// finish sends rec and ends the put, returning the server's answer.
func (p *pausedPut) finish(rec arrow.RecordBatch) error {
	if err := p.w.Write(rec); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	_ = p.w.Close()
	_ = p.stream.CloseSend()
	if _, err := p.stream.Recv(); err != nil {
		return err
	}
	return nil
}

// selfSigned is a certificate for 127.0.0.1.
func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "quiver test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestPausedPutsDoNotHoldBudget (red team round 23's x02): five puts, each
// on its own connection, send a batch and pause (slow producers) — more
// than the budget's two largest messages. Their receives give their
// reservations back, so an unrelated put goes through at once; then each
// paused put sends its next batch (its receive is re-armed before the
// bytes reach it) and commits, and nothing stays charged.
// Over TLS too: the connection the server watches is under the TLS layer.
func TestPausedPutsDoNotHoldBudget(t *testing.T) {
	for _, withTLS := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", withTLS), func(t *testing.T) { testPausedPuts(t, withTLS) })
	}
}

func testPausedPuts(t *testing.T, withTLS bool) {
	opts := []Option{WithMaxRecvMsgSize(1 << 20), WithMaxInflightBytes(2 << 20),
		WithInflightWait(5 * time.Second), withDormantAfter(50 * time.Millisecond)}
	var dopts []grpc.DialOption
	if withTLS {
		opts = append(opts, WithTLS(&tls.Config{Certificates: []tls.Certificate{selfSigned(t)}}))
		dopts = append(dopts, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{InsecureSkipVerify: true})))
	}
	ts := startSrv(t, true, opts...)
	ts.c = quivertest.MustDial(t, ts.addr, dopts...)
	rec := strBatch(10, 10)
	defer rec.Release()
	var paused []*pausedPut
	for i := 0; i < 5; i++ {
		c, _ := dialGated(t, ts.addr, dopts...)
		paused = append(paused, startPausedPut(t, c, fmt.Sprintf("slow%d", i), rec))
	}
	// Every paused receive has gone dormant: the pool is empty although
	// five receives wait.
	waitDormant(t, ts, len(paused))
	if n := metricValue(t, ts.srv.metrics.inflight.WithLabelValues("data")); n != 0 {
		t.Fatalf("quiver_inflight_bytes{pool=data} %v with five paused puts", n)
	}
	time.Sleep(100 * time.Millisecond)
	if n := ts.srv.budget.used.Load(); n != 0 {
		t.Fatalf("data pool holds %d bytes with five paused puts", n)
	}
	start := time.Now()
	if err := putErr(context.Background(), ts.c, []string{"other"}, rec); err != nil {
		t.Fatalf("an unrelated put with five paused ones: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("an unrelated put took %v", d)
	}
	if n := metricValue(t, ts.srv.metrics.inflightRefusals.WithLabelValues("data")); n != 0 {
		t.Fatalf("refusals %v", n)
	}
	// The slow producers go on, all at once.
	errs := make(chan error, len(paused))
	for _, p := range paused {
		go func() { errs <- p.finish(rec) }()
	}
	for range paused {
		if err := <-errs; err != nil {
			t.Fatalf("a paused put that went on: %v", err)
		}
	}
	for i := range paused {
		if err := getErr(context.Background(), ts.c, fmt.Sprintf("slow%d", i)); err != nil {
			t.Fatalf("read slow%d: %v", i, err)
		}
	}
	waitUntil(t, "the pools are empty", func() bool {
		return ts.srv.budget.used.Load() == 0 && ts.srv.reqBudget.used.Load() == 0
	})
}

// recvConns collects a test server's followed connections
// (withRecvConnHook), to tell how far their receives are.
type recvConns struct {
	mu sync.Mutex
	cs []*recvConn
}

func (r *recvConns) add(c *recvConn) {
	r.mu.Lock()
	r.cs = append(r.cs, c)
	r.mu.Unlock()
}

// midMessage is how many receives hold their reservation with part of a
// message arrived (those that never go dormant).
func (r *recvConns) midMessage() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.cs {
		c.mu.Lock()
		for _, w := range c.watch {
			if w.state == recvArmed && c.arrivedLocked(w) {
				n++
			}
		}
		c.mu.Unlock()
	}
	return n
}

// waitStalled waits until n receives are stalled in the middle of a
// message (stallMidMessage), holding the whole 2 MiB pool between them.
// (A pool full alone does not tell: a receive reserves when it starts, and
// one whose bytes are late may go dormant once before they arrive.)
func waitStalled(t *testing.T, ts *testServer, rc *recvConns, n int) {
	t.Helper()
	waitUntil(t, "the stalled receives hold the pool", func() bool {
		return rc.midMessage() == n && ts.srv.budget.used.Load() == 2<<20
	})
}

// stallMidMessage makes a paused put on its gated connection send the
// first 512 KiB of a larger batch and stop: more than the 256 KiB stream
// window, so part of the message has arrived since its receive started.
// (What a client sends before that is within the window, which no receive
// covers: a receive whose connection delivered nothing since it started
// may go dormant with that much of a message in memory.)
func stallMidMessage(t *testing.T, p *pausedPut, g *gateConn, big arrow.RecordBatch) {
	t.Helper()
	p.gate = g
	g.stopAfter(512 << 10)
	go func() { _ = p.w.Write(big) }()
}

// TestBudgetHeldMidMessage: the budget still bounds messages that are
// arriving. Two puts (each on its own connection, as in
// TestPausedPutsDoNotHoldBudget) stop in the middle of a large batch: their
// receives keep the largest message reserved however long they wait (part
// of a message is in memory, and the rest may come at any moment), so a
// third put waits and fails ResourceExhausted; when one ends, puts go
// through again.
func TestBudgetHeldMidMessage(t *testing.T) {
	rc := &recvConns{}
	ts := startSrv(t, true, WithMaxRecvMsgSize(1<<20), WithMaxInflightBytes(2<<20),
		WithInflightWait(300*time.Millisecond), withDormantAfter(20*time.Millisecond), withRecvConnHook(rc.add))
	rec := strBatch(10, 10)
	defer rec.Release()
	big := strBatch(8<<10, 100) // about 850 KiB
	defer big.Release()
	var paused []*pausedPut
	for i := 0; i < 2; i++ {
		c, g := dialGated(t, ts.addr)
		p := startPausedPut(t, c, fmt.Sprintf("stalled%d", i), rec)
		paused = append(paused, p)
		stallMidMessage(t, p, g, big)
	}
	waitStalled(t, ts, rc, 2)
	time.Sleep(200 * time.Millisecond) // many times dormantAfter
	if n := ts.srv.budget.used.Load(); n != 2<<20 {
		t.Fatalf("data pool holds %d bytes with two receives in the middle of a message, want %d", n, 2<<20)
	}
	start := time.Now()
	err := putErr(context.Background(), ts.c, []string{"third"}, rec)
	if status.Code(err) != codes.ResourceExhausted || time.Since(start) < 250*time.Millisecond {
		t.Fatalf("third put after %v: %v", time.Since(start), err)
	}
	paused[0].abort()
	waitUntil(t, "the aborted put's reservation is released", func() bool { return ts.srv.budget.used.Load() <= 1<<20 })
	if err := putErr(context.Background(), ts.c, []string{"fourth"}, rec); err != nil {
		t.Fatalf("a put after a stalled one ended: %v", err)
	}
	paused[1].abort()
	waitUntil(t, "the pools are empty", func() bool {
		return ts.srv.budget.used.Load() == 0 && ts.srv.reqBudget.used.Load() == 0
	})
}

// TestDormantRearmWaits: a paused put whose client goes on while the
// budget is full is not read further until there is room (its bytes are
// never uncounted): it completes once a receive holding the budget ends.
// If no room comes within --inflight-wait, its connection is closed and
// the refusal counted.
func TestDormantRearmWaits(t *testing.T) {
	for _, room := range []bool{true, false} {
		t.Run(fmt.Sprintf("room=%v", room), func(t *testing.T) {
			wait := time.Second // the refusal comes after it
			if room {
				wait = 10 * time.Second // room comes well before it
			}
			rc := &recvConns{}
			ts := startSrv(t, true, WithMaxRecvMsgSize(1<<20), WithMaxInflightBytes(2<<20),
				WithInflightWait(wait), withDormantAfter(20*time.Millisecond), withRecvConnHook(rc.add))
			rec := strBatch(10, 10)
			defer rec.Release()
			big := strBatch(8<<10, 100)
			defer big.Release()
			slowC, _ := dialGated(t, ts.addr)
			slow := startPausedPut(t, slowC, "slow", rec)
			waitDormant(t, ts, 1)
			var stalled []*pausedPut
			for i := 0; i < 2; i++ {
				c, g := dialGated(t, ts.addr)
				p := startPausedPut(t, c, fmt.Sprintf("stalled%d", i), rec)
				stalled = append(stalled, p)
				stallMidMessage(t, p, g, big)
			}
			waitStalled(t, ts, rc, 2)
			if n := metricValue(t, ts.srv.metrics.dormant); n != 1 {
				t.Fatalf("%v dormant receives, want the slow put's", n)
			}
			waits := metricValue(t, ts.srv.metrics.inflightWaits.WithLabelValues("data"))
			done := make(chan error, 1)
			go func() { done <- slow.finish(rec) }()
			waitUntil(t, "the slow put's connection waits for room", func() bool {
				return metricValue(t, ts.srv.metrics.inflightWaits.WithLabelValues("data")) > waits
			})
			select {
			case err := <-done:
				t.Fatalf("the slow put finished while the pool was full: %v", err)
			case <-time.After(200 * time.Millisecond):
			}
			if n := ts.srv.budget.used.Load(); n != 2<<20 {
				t.Fatalf("data pool holds %d bytes, want %d", n, 2<<20)
			}
			if room {
				stalled[0].abort()
				if err := <-done; err != nil {
					t.Fatalf("the slow put once there was room: %v", err)
				}
				if err := getErr(context.Background(), ts.c, "slow"); err != nil {
					t.Fatal(err)
				}
			} else {
				err := <-done
				if status.Code(err) != codes.Unavailable {
					t.Fatalf("the slow put with no room: %v", err)
				}
				if n := metricValue(t, ts.srv.metrics.inflightRefusals.WithLabelValues("data")); n != 1 {
					t.Fatalf("refusals %v", n)
				}
				if err := getErr(context.Background(), ts.c, "slow"); status.Code(err) != codes.NotFound {
					t.Fatalf("read of the refused put: %v", err)
				}
			}
			for _, p := range stalled {
				p.abort()
			}
			waitUntil(t, "the pools are empty", func() bool {
				return ts.srv.budget.used.Load() == 0 && ts.srv.reqBudget.used.Load() == 0
			})
		})
	}
}

// TestPingDoesNotPinPausedPut: a paused put's client that pings its
// connection (a keepalive) does not wake the dormant receive: a PING is no
// DATA of its stream (red team round 24's y01; before, it re-armed the
// receive for a moment). The put then goes on and commits.
func TestPingDoesNotPinPausedPut(t *testing.T) {
	ts := startSrv(t, true, WithMaxRecvMsgSize(1<<20), WithMaxInflightBytes(2<<20),
		WithInflightWait(5*time.Second), withDormantAfter(50*time.Millisecond))
	rec := strBatch(10, 10)
	defer rec.Release()
	c, g := dialGated(t, ts.addr)
	p := startPausedPut(t, c, "slow", rec)
	waitDormant(t, ts, 1)
	for i := 0; i < 2; i++ { // the server's ping policy allows two
		if err := g.ping(); err != nil {
			t.Fatal(err)
		}
		assertHoldsNothing(t, ts, 200*time.Millisecond, "after a ping")
	}
	if err := p.finish(rec); err != nil {
		t.Fatalf("the paused put after pings: %v", err)
	}
	if err := getErr(context.Background(), ts.c, "slow"); err != nil {
		t.Fatal(err)
	}
}

// assertHoldsNothing fails t if the data pool holds anything during d.
func assertHoldsNothing(t *testing.T, ts *testServer, d time.Duration, when string) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
		if n := ts.srv.budget.used.Load(); n != 0 {
			t.Fatalf("data pool holds %d bytes %s", n, when)
		}
	}
}
