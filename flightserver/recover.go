package flightserver

import (
	"context"
	"fmt"
	"runtime/debug"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// errPanic is what a client learns about a panic in its RPC: no server
// path, no stack, no value.
var errPanic = status.Error(codes.Internal, "internal error")

// maxPanicValue caps the panic value in the log line: a value's string
// form is the client's bytes at worst (and the string of a deeply nested
// type grows with the square of its depth).
const maxPanicValue = 4 << 10

// recovered logs a recovered panic with its stack, counts it, and returns
// the status the client gets. It is called from a deferred function, so
// debug.Stack shows the panicking frames.
func (s *Server) recovered(method string, v any) error {
	s.metrics.panic(method)
	s.opts.log.Error().Str("method", method).Str("panic", truncate(v)).Str("stack", string(debug.Stack())).
		Msg("panic recovered; the RPC failed with Internal and the server keeps serving")
	return errPanic
}

// unaryRecover turns a panic in a unary RPC into codes.Internal.
func (s *Server) unaryRecover(ctx context.Context, req any, si *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		if v := recover(); v != nil {
			resp, err = nil, s.recovered(methodName(si.FullMethod), v)
			cause := fmt.Errorf("panic: %s", truncate(v))
			info(ctx).cause.Store(&cause)
		}
	}()
	return h(ctx, req)
}

// streamRecover turns a panic in a streaming RPC (or in a unary RPC the
// server registers as a stream, see streamify) into codes.Internal.
func (s *Server) streamRecover(srv any, ss grpc.ServerStream, si *grpc.StreamServerInfo, h grpc.StreamHandler) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = s.recovered(methodName(si.FullMethod), v)
			cause := fmt.Errorf("panic: %s", truncate(v))
			info(ss.Context()).cause.Store(&cause)
		}
	}()
	return h(srv, ss)
}

// goSafe runs f in a new goroutine; a panic in f is recovered (an
// interceptor cannot catch it there), logged and counted, and handed to
// onPanic as the error the caller should return.
func (s *Server) goSafe(method string, f func(), onPanic func(error)) {
	go func() {
		defer func() {
			if v := recover(); v != nil {
				onPanic(s.recovered(method, v))
			}
		}()
		f()
	}()
}

// truncate is v's string form cut to maxPanicValue bytes.
func truncate(v any) string {
	val := fmt.Sprint(v)
	if len(val) > maxPanicValue {
		return val[:maxPanicValue] + "…"
	}
	return val
}

// methodName is the last component of a gRPC full method name.
func methodName(full string) string { return full[strings.LastIndexByte(full, '/')+1:] }

// hook calls the test-only hook at a named point of an RPC (see
// withTestHook); it is a no-op in production.
func (s *Server) hook(point string) {
	if s.opts.testHook != nil {
		s.opts.testHook(point)
	}
}

// withTestHook installs f, called at named points of the RPCs ("DoPut"
// after the first batch, "DoGet" after each batch, "GetFlightInfo" at its
// start, "send" inside the goroutine of a guarded send), so tests can
// inject panics where real bugs would hit.
func withTestHook(f func(point string)) Option { return func(o *options) { o.testHook = f } }
