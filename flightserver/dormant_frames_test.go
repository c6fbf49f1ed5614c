package flightserver

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/quiverdb/quiver/internal/quivertest"
)

// raw writes b on the client's connection between the client's writes.
func (g *gateConn) raw(b []byte) error {
	g.wmu.Lock()
	defer g.wmu.Unlock()
	_, err := g.Conn.Write(b)
	return err
}

// waitDormant waits until n paused puts' receives are dormant and the data
// pool is empty. (An empty pool alone does not tell: it is empty too before
// a put's receive starts, and for a moment between its messages.)
func waitDormant(t *testing.T, ts *testServer, n int) {
	t.Helper()
	waitUntil(t, fmt.Sprintf("%d paused receives are dormant", n), func() bool {
		return metricValue(t, ts.srv.metrics.dormant) == float64(n) && ts.srv.budget.used.Load() == 0
	})
}

// watchPool fails t (at stop) if the data pool held anything between the
// call and stop.
func watchPool(t *testing.T, ts *testServer) (stop func()) {
	t.Helper()
	var peak atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			if n := ts.srv.budget.used.Load(); n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	return func() {
		t.Helper()
		close(done)
		wg.Wait()
		if n := peak.Load(); n != 0 {
			t.Fatalf("the data pool held up to %d bytes while a paused put's connection carried other traffic", n)
		}
	}
}

// TestReadsDoNotPinPausedPut (red team round 24's y01): a paused put's
// client goes on reading through the same connection (one grpc.ClientConn)
// — hundreds of small DoGets, far more bytes than dormantSlack. Its
// receive stays dormant throughout (the DoGets' frames are other streams'),
// and the put then goes on and commits. Over TLS too, where the frames are
// followed above the TLS layer.
func TestReadsDoNotPinPausedPut(t *testing.T) {
	for _, withTLS := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", withTLS), func(t *testing.T) {
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
			if err := putErr(context.Background(), ts.c, []string{"ref"}, rec); err != nil {
				t.Fatal(err)
			}
			c, _ := dialGated(t, ts.addr, dopts...)
			p := startPausedPut(t, c, "slow", rec)
			waitDormant(t, ts, 1)
			stop := watchPool(t, ts)
			for i := 0; i < 500; i++ {
				if err := getErr(context.Background(), c, "ref"); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(200 * time.Millisecond) // many times dormantAfter
			stop()
			if err := p.finish(rec); err != nil {
				t.Fatalf("the paused put after the reads: %v", err)
			}
			if err := getErr(context.Background(), ts.c, "slow"); err != nil {
				t.Fatal(err)
			}
			waitUntil(t, "the pools are empty", func() bool {
				return ts.srv.budget.used.Load() == 0 && ts.srv.reqBudget.used.Load() == 0
			})
		})
	}
}

// TestControlFramesDoNotPinPausedPut (y01, a raw client): a paused put's
// client sends PRIORITY and WINDOW_UPDATE frames naming the put's own
// stream, WINDOW_UPDATE frames of the connection and SETTINGS frames —
// tens of KiB, none of it DATA. The receive stays dormant throughout; its
// next batch still goes through.
func TestControlFramesDoNotPinPausedPut(t *testing.T) {
	ts := startSrv(t, true, WithMaxRecvMsgSize(1<<20), WithMaxInflightBytes(2<<20),
		WithInflightWait(5*time.Second), withDormantAfter(50*time.Millisecond))
	rec := strBatch(10, 10)
	defer rec.Release()
	c, g := dialGated(t, ts.addr) // its ListFlights is stream 1
	p := startPausedPut(t, c, "slow", rec)
	const put = 3 // the put's stream
	waitDormant(t, ts, 1)
	stop := watchPool(t, ts)
	var frames bytes.Buffer
	for i := 0; i < 1000; i++ {
		frames.Write(h2Frame(0x2, 0, put, []byte{0, 0, 0, 0, 15}))   // PRIORITY: on stream 0, weight 16
		frames.Write(h2Frame(0x8, 0, put, []byte{0, 0, 0, 1}))       // WINDOW_UPDATE of the put's stream
		frames.Write(h2Frame(0x8, 0, 0, []byte{0, 0, 0, 1}))         // of the connection
		frames.Write(h2Frame(0x4, 0, 0, nil))                        // SETTINGS, none changed
		frames.Write(h2Frame(0x4, 0, 0, []byte{0, 3, 0, 0, 0, 100})) // SETTINGS_MAX_CONCURRENT_STREAMS 100 (of the server's pushes)
	}
	for b := frames.Bytes(); len(b) > 0; {
		k := min(len(b), 4096)
		if err := g.raw(b[:k]); err != nil {
			t.Fatal(err)
		}
		b = b[k:]
	}
	// The connection is alive and read to the end: a request on it is
	// answered after all those frames.
	if err := getErr(context.Background(), c, "nothing"); err == nil {
		t.Fatal("read of a missing dataset succeeded")
	}
	time.Sleep(200 * time.Millisecond) // many times dormantAfter
	stop()
	if err := p.finish(rec); err != nil {
		t.Fatalf("the paused put after control frames: %v", err)
	}
	if err := getErr(context.Background(), ts.c, "slow"); err != nil {
		t.Fatal(err)
	}
}

// TestOwnDataRearmsAmidOtherTraffic: the paused put's own next batch is
// still held back until its receive has room again, while the other
// streams of its connection are not: with the pool full of two puts
// stalled mid-message, the paused put's client reads on through its
// connection, its next batch waits (it reaches grpc only once re-armed),
// and goes through when a stalled put ends.
func TestOwnDataRearmsAmidOtherTraffic(t *testing.T) {
	rc := &recvConns{}
	ts := startSrv(t, true, WithMaxRecvMsgSize(1<<20), WithMaxInflightBytes(2<<20),
		WithInflightWait(10*time.Second), withDormantAfter(20*time.Millisecond), withRecvConnHook(rc.add))
	rec := strBatch(10, 10)
	defer rec.Release()
	big := strBatch(8<<10, 100)
	defer big.Release()
	if err := putErr(context.Background(), ts.c, []string{"ref"}, rec); err != nil {
		t.Fatal(err)
	}
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
	defer func() {
		for _, p := range stalled {
			p.abort()
		}
	}()
	waitStalled(t, ts, rc, 2)
	// Reads on the slow put's connection go on although the pool is full.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	for i := 0; i < 50; i++ {
		if err := getErr(ctx, slowC, "ref"); err != nil {
			t.Fatalf("a read on the paused put's connection with the pool full: %v", err)
		}
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
	stalled[0].abort()
	if err := <-done; err != nil {
		t.Fatalf("the slow put once there was room: %v", err)
	}
	if err := getErr(context.Background(), ts.c, "slow"); err != nil {
		t.Fatal(err)
	}
}

// TestTransportStreamID: the stream id read from grpc-go's server stream is
// the HTTP/2 one (client streams 1, 3, 5, …): if a grpc-go upgrade changes
// what transportStreamID relies on, this says so directly.
func TestTransportStreamID(t *testing.T) {
	var mu sync.Mutex
	var ids []uint32
	srv := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		mu.Lock()
		ids = append(ids, transportStreamID(grpc.ServerTransportStreamFromContext(ctx)))
		mu.Unlock()
		return h(ctx, req)
	}))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	for i := 0; i < 3; i++ {
		if _, err := healthpb.NewHealthClient(cc).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(ids) != "[1 3 5]" {
		t.Fatalf("stream ids %v, want [1 3 5]", ids)
	}
	if id := transportStreamID(nil); id != 0 {
		t.Fatalf("id of no stream: %d", id)
	}
}
