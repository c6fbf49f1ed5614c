package flightserver

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Defaults of the stream limits; each has an Option.
const (
	// DefaultMaxConcurrentStreams is how many RPCs one client connection
	// may have open at once (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS);
	// grpc-go clients queue further calls until a stream frees up.
	DefaultMaxConcurrentStreams = 256
	// DefaultIdleTimeout is how long a DoPut or DoGet stream may go without
	// a message moving (the client sending nothing, or reading nothing)
	// before the server cancels it. A cancelled put commits nothing.
	DefaultIdleTimeout = 5 * time.Minute
)

// DefaultSendTimeout is how long a stream may wait to hand one message to
// a client that does not read (HTTP/2 flow control stopped it) before the
// server cancels it: a DoGet whose client stopped reading holds its
// current batch until then.
const DefaultSendTimeout = time.Minute

// requestTimeout bounds the wait for the request message of an RPC that is
// not a data stream: clients send it with the call, and the wait holds a
// reservation of the in-flight budget.
const requestTimeout = 30 * time.Second

// dataStream reports whether a method's client sends data at its own pace:
// its receives are bounded by the idle timeout. (DoGet's client sends one
// ticket with the call: its receive is a request's, bounded by
// requestTimeout, so that a DoGet that never sends its ticket cannot hold
// the request pool.)
func dataStream(method string) bool {
	switch method {
	case "/arrow.flight.protocol.FlightService/DoPut",
		"/arrow.flight.protocol.FlightService/DoExchange":
		return true
	}
	return false
}

// positiveMin is the smaller of the positive durations (0 when neither
// is).
func positiveMin(a, b time.Duration) time.Duration {
	switch {
	case a <= 0:
		return max(b, 0)
	case b <= 0:
		return a
	}
	return min(a, b)
}

// streamIdle bounds how long a stream's handler may wait on its client:
// a receive of a data stream by the idle timeout, the request of any other
// stream by requestTimeout, a send by the send timeout (or the idle
// timeout when shorter).
func (s *Server) streamIdle(srv any, ss grpc.ServerStream, si *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	recv := positiveMin(s.opts.idleTimeout, requestTimeout)
	if dataStream(si.FullMethod) {
		recv = s.opts.idleTimeout
	}
	send := positiveMin(s.opts.idleTimeout, s.opts.sendTimeout)
	if recv <= 0 && send <= 0 {
		return h(srv, ss)
	}
	return h(srv, &idleStream{ServerStream: ss, s: s, method: methodName(si.FullMethod), recvTimeout: recv, sendTimeout: send})
}

// idleStream fails a RecvMsg or SendMsg that does not complete within its
// timeout. A blocked grpc RecvMsg or SendMsg cannot be interrupted until
// the RPC ends, so each call runs in its own goroutine; on timeout the
// handler gets DeadlineExceeded at once, returns (committing nothing), and
// the end of the RPC then unblocks the abandoned call. After a timeout
// every further call fails without touching the stream, so the stream is
// never used by two goroutines at once. A panic in the call's goroutine is
// recovered there (no interceptor sees it) and fails the RPC as Internal.
type idleStream struct {
	grpc.ServerStream
	s           *Server
	method      string
	recvTimeout time.Duration
	sendTimeout time.Duration
	idled       atomic.Pointer[error]
}

func (w *idleStream) RecvMsg(m any) error {
	if w.recvTimeout <= 0 {
		return w.ServerStream.RecvMsg(m)
	}
	return w.guard(w.recvTimeout, "receive", func() error { return w.ServerStream.RecvMsg(m) })
}

func (w *idleStream) SendMsg(m any) error {
	if w.sendTimeout <= 0 {
		return w.ServerStream.SendMsg(m)
	}
	if fd, ok := m.(*flight.FlightData); ok {
		// arrow-go's Flight writer reuses its FlightData and changes it
		// once Send returns; a send abandoned on timeout still encodes it,
		// so it gets a struct of its own (the byte slices are not written
		// again: the RPC ends).
		m = &flight.FlightData{FlightDescriptor: fd.FlightDescriptor, DataHeader: fd.DataHeader, AppMetadata: fd.AppMetadata, DataBody: fd.DataBody}
	}
	return w.guard(w.sendTimeout, "send", func() error {
		w.s.hook("send")
		return w.ServerStream.SendMsg(m)
	})
}

func (w *idleStream) guard(timeout time.Duration, what string, f func() error) error {
	if err := w.idled.Load(); err != nil {
		return *err
	}
	done := make(chan error, 1)
	w.s.goSafe(w.method, func() { done <- f() }, func(err error) { done <- err })
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case err := <-done:
		if status.Code(err) == codes.Internal && errors.Is(err, errPanic) {
			w.idled.Store(&err) // the stream's state is unknown after a panic
		}
		return err
	case <-t.C:
		var err error
		if what == "send" && (w.s.opts.idleTimeout <= 0 || timeout < w.s.opts.idleTimeout) {
			w.s.metrics.sendTimeout()
			err = status.Errorf(codes.DeadlineExceeded, "stream stalled: the client accepted no message for %s (the server's send timeout)", timeout)
		} else {
			w.s.metrics.idleTimeout()
			err = status.Errorf(codes.DeadlineExceeded, "stream idle: could not %s a message for %s (the server's idle stream timeout)", what, timeout)
		}
		w.idled.Store(&err)
		return err
	}
}
