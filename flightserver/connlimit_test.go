package flightserver

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
)

// http2Preface is what a client sends first on a connection: the HTTP/2
// preface and an empty SETTINGS frame. It needs no credentials.
var http2Preface = append([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), 0, 0, 0, 4, 0, 0, 0, 0, 0)

// rawConn opens a connection that sends the preface and nothing more.
func rawConn(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write(http2Preface); err != nil {
		t.Fatal(err)
	}
	return c
}

// answered reports whether the server sent anything on c within d (its
// SETTINGS frame, once it accepted the connection).
func answered(t *testing.T, c net.Conn, d time.Duration) bool {
	t.Helper()
	if err := c.SetReadDeadline(time.Now().Add(d)); err != nil {
		t.Fatal(err)
	}
	n, err := c.Read(make([]byte, 1))
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return false
	}
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return n > 0
}

// closedWithin reports whether the server closed c within d, reading and
// dropping what it sends until then.
func closedWithin(t *testing.T, c net.Conn, d time.Duration) bool {
	t.Helper()
	if err := c.SetReadDeadline(time.Now().Add(d)); err != nil {
		t.Fatal(err)
	}
	_, err := io.Copy(io.Discard, c)
	switch {
	case err == nil: // EOF
		return true
	case errors.Is(err, os.ErrDeadlineExceeded):
		return false
	}
	return true // reset
}

// TestIdleConnectionClosed: a connection that never makes a call (no
// credentials needed to open one) is closed after the idle setting, as is
// one whose calls have ended; one left alone by a server with the limit
// off stays open.
func TestIdleConnectionClosed(t *testing.T) {
	ts := startSrv(t, false, WithMaxConnectionIdle(300*time.Millisecond))
	c := rawConn(t, ts.addr)
	t0 := time.Now()
	if !closedWithin(t, c, 10*time.Second) {
		t.Fatal("an idle connection was still open 10 s after an idle limit of 300 ms")
	}
	t.Logf("the idle connection was closed after %v", time.Since(t0))
	if _, err := ts.c.ListActions(context.Background(), &flight.Empty{}); err != nil {
		t.Fatal(err)
	}
	// The client reconnects on its next call after the server closed its
	// idle connection.
	time.Sleep(time.Second)
	if _, err := ts.c.ListActions(context.Background(), &flight.Empty{}); err != nil {
		t.Fatalf("a call after the idle close: %v", err)
	}

	never := startSrv(t, false, WithMaxConnectionIdle(0))
	if closedWithin(t, rawConn(t, never.addr), time.Second) {
		t.Fatal("a connection was closed with the idle limit off")
	}
}

// TestConnectionLimit: with the limit reached, a further connection waits
// unanswered (in the listen backlog) while the served connections keep
// working; it is served once one of them closes.
func TestConnectionLimit(t *testing.T) {
	ts := startSrv(t, false, WithMaxConnections(2), WithMaxConnectionIdle(0))
	list := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		st, err := ts.c.ListActions(ctx, &flight.Empty{})
		if err != nil {
			return err
		}
		for {
			if _, err := st.Recv(); err != nil {
				if errors.Is(err, io.EOF) {
					return nil
				}
				return err
			}
		}
	}
	if err := list(); err != nil { // connection 1: the client's
		t.Fatal(err)
	}
	second := rawConn(t, ts.addr)
	if !answered(t, second, 5*time.Second) {
		t.Fatal("the second connection, within the limit, was not served")
	}
	third := rawConn(t, ts.addr)
	if answered(t, third, 500*time.Millisecond) {
		t.Fatal("a connection over the limit was served")
	}
	if err := list(); err != nil {
		t.Fatalf("a served connection failed while the limit was reached: %v", err)
	}
	m := ts.srv.metrics
	if n := metricValue(t, m.conns); n != 2 {
		t.Errorf("quiver_open_connections = %v, want 2", n)
	}
	if n := metricValue(t, m.connWaits); n < 1 {
		t.Errorf("quiver_connection_limit_waits_total = %v, want ≥ 1", n)
	}
	second.Close()
	if !answered(t, third, 5*time.Second) {
		t.Fatal("the waiting connection was not served after another closed")
	}
}
