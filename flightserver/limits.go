package flightserver

import (
	"sync/atomic"
	"time"

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

// idleGuarded reports whether a method's stream is watched for idleness:
// the data streams, where a stalled client holds files and memory.
func idleGuarded(method string) bool {
	switch method {
	case "/arrow.flight.protocol.FlightService/DoPut",
		"/arrow.flight.protocol.FlightService/DoGet",
		"/arrow.flight.protocol.FlightService/DoExchange":
		return true
	}
	return false
}

func (s *Server) streamIdle(srv any, ss grpc.ServerStream, si *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if s.opts.idleTimeout <= 0 || !idleGuarded(si.FullMethod) {
		return h(srv, ss)
	}
	return h(srv, &idleStream{ServerStream: ss, timeout: s.opts.idleTimeout, onIdle: s.metrics.idleTimeout})
}

// idleStream fails a RecvMsg or SendMsg that does not complete within the
// timeout. A blocked grpc RecvMsg cannot be interrupted until the RPC
// ends, so each call runs in its own goroutine; on timeout the handler
// gets DeadlineExceeded at once, returns (committing nothing), and the
// end of the RPC then unblocks the abandoned call. After a timeout every
// further call fails without touching the stream, so the stream is never
// used by two goroutines at once.
type idleStream struct {
	grpc.ServerStream
	timeout time.Duration
	onIdle  func()
	idled   atomic.Bool
}

func (w *idleStream) RecvMsg(m any) error {
	return w.guard("receive", func() error { return w.ServerStream.RecvMsg(m) })
}

func (w *idleStream) SendMsg(m any) error {
	return w.guard("send", func() error { return w.ServerStream.SendMsg(m) })
}

func (w *idleStream) guard(what string, f func() error) error {
	if w.idled.Load() {
		return w.idleErr(what)
	}
	done := make(chan error, 1)
	go func() { done <- f() }()
	t := time.NewTimer(w.timeout)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		w.idled.Store(true)
		w.onIdle()
		return w.idleErr(what)
	}
}

func (w *idleStream) idleErr(what string) error {
	return status.Errorf(codes.DeadlineExceeded, "stream idle: could not %s a message for %s (the server's idle stream timeout)", what, w.timeout)
}
