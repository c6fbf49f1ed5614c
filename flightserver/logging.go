package flightserver

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/quiverdb/quiver/store"
)

// rpcInfo is what a handler tells the log line about its RPC.
type rpcInfo struct {
	profile  atomic.Value // string
	action   atomic.Value // string
	rows     atomic.Int64
	bytes    atomic.Int64
	cause    atomic.Pointer[error] // the error behind an Internal status
	identity atomic.Value          // string: who the RPC ran as
}

type rpcKey struct{}

// info returns the RPC's record, or a throwaway one outside an interceptor.
func info(ctx context.Context) *rpcInfo {
	if ri, ok := ctx.Value(rpcKey{}).(*rpcInfo); ok {
		return ri
	}
	return &rpcInfo{}
}

// fail records err for the log and returns its gRPC status.
func fail(ctx context.Context, err error) error {
	info(ctx).cause.Store(&err)
	return statusOf(err)
}

// failed is fail that also counts lock timeouts for the metrics.
func (s *Server) failed(ctx context.Context, err error) error {
	if errors.Is(err, store.ErrLockTimeout) {
		s.metrics.lockTimeout.Inc()
	}
	return fail(ctx, err)
}

type wrappedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (w *wrappedStream) Context() context.Context { return w.ctx }

// decodeStream is the stream streamLog hands on: every other interceptor
// and the handler read through it, and it is the one that calls grpc-go's
// RecvMsg. It has the codec report a message that does not decode to it
// (recvBox) rather than to grpc-go, and it makes the errors grpc-go
// reports for a client's malformed request INVALID_ARGUMENT
// (recvError), red team round 24's y02.
type decodeStream struct {
	grpc.ServerStream
	ctx context.Context
}

// Context is the RPC's context, with its rpcInfo.
func (w *decodeStream) Context() context.Context { return w.ctx }

// RecvMsg receives the next message into m; a message that does not
// decode is INVALID_ARGUMENT.
func (w *decodeStream) RecvMsg(m any) error {
	b := &recvBox{m: m}
	if err := w.ServerStream.RecvMsg(b); err != nil {
		return recvError(err)
	}
	return b.err
}

// recvError is err, a receive error of grpc-go's, as the server reports
// it: a message cut off by the client's half-close is the client's
// malformed request, INVALID_ARGUMENT. grpc-go has already written its own
// status to the client by then (INTERNAL "unexpected EOF": see
// serverStream.RecvMsg, which writes the status of any receive error but
// io.EOF before it returns, so no interceptor can change what the client
// is told); what this changes is what the handler does with it, the log
// line (a warning) and the metrics (so that the alert on Internal does
// not fire for a client's mistake). docs/protocol.md "Errors" says so.
//
// grpc-go reports a cut message (its parser's io.ErrUnexpectedEOF: the
// stream ended, END_STREAM, before as many bytes as the 5-byte prefix
// promised, or within the prefix) as INTERNAL "unexpected EOF"
// (stream.go serverStream.RecvMsg).
func recvError(err error) error {
	if st, ok := status.FromError(err); ok && st.Code() == codes.Internal && st.Message() == io.ErrUnexpectedEOF.Error() {
		return status.Error(codes.InvalidArgument,
			"the request stream ended in the middle of a message: fewer bytes came than its length prefix promised")
	}
	return err
}

func (s *Server) unaryLog(ctx context.Context, req any, si *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	ri := &rpcInfo{}
	start := s.opts.now()
	resp, err := h(context.WithValue(ctx, rpcKey{}, ri), req)
	s.logRPC(ctx, si.FullMethod, ri, start, err)
	return resp, err
}

func (s *Server) streamLog(srv any, ss grpc.ServerStream, si *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	ri := &rpcInfo{}
	start := s.opts.now()
	name := si.FullMethod[strings.LastIndexByte(si.FullMethod, '/')+1:]
	if !isHealth(si.FullMethod) && !s.unary[si.FullMethod] {
		defer s.metrics.streamOpen(name)()
	}
	err := h(srv, &decodeStream{ServerStream: ss, ctx: context.WithValue(ss.Context(), rpcKey{}, ri)})
	s.logRPC(ss.Context(), si.FullMethod, ri, start, err)
	return err
}

// logRPC writes the one line per RPC: method, profile, rows, bytes,
// duration, peer, status.
func (s *Server) logRPC(ctx context.Context, method string, ri *rpcInfo, start time.Time, err error) {
	code := status.Code(err)
	name := method[strings.LastIndexByte(method, '/')+1:]
	action, _ := ri.action.Load().(string)
	s.metrics.rpc(name, code, s.opts.now().Sub(start), action, ri)
	var pe *store.PanicError
	if c := ri.cause.Load(); c != nil && errors.As(*c, &pe) {
		// A panic the store recovered from, after cleaning up after it.
		s.metrics.panic(name)
		s.opts.log.Error().Str("method", name).Str("panic", truncate(pe.Value)).Str("stack", string(pe.Stack)).
			Msg("panic recovered; the RPC failed and the server keeps serving")
	}
	lvl := zerolog.InfoLevel
	switch {
	case strings.HasPrefix(method, "/grpc.health."):
		lvl = zerolog.DebugLevel
	case code == codes.Internal || code == codes.Unknown:
		lvl = zerolog.ErrorLevel
	case code != codes.OK:
		lvl = zerolog.WarnLevel
	}
	ev := s.opts.log.WithLevel(lvl)
	if !ev.Enabled() {
		return
	}
	ev = ev.Str("method", name)
	if id, ok := ri.identity.Load().(string); ok && id != "" {
		ev = ev.Str("identity", id)
	}
	if p, ok := ri.profile.Load().(string); ok && p != "" {
		ev = ev.Str("profile", p)
	}
	if action != "" {
		ev = ev.Str("action", clip(action, maxLoggedAction))
	}
	ev = ev.Int64("rows", ri.rows.Load()).Int64("bytes", ri.bytes.Load())
	ev = ev.Dur("duration", s.opts.now().Sub(start))
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		ev = ev.Str("peer", p.Addr.String())
	}
	ev = ev.Str("status", code.String())
	if err != nil {
		ev = ev.Str("error", status.Convert(err).Message())
		if c := ri.cause.Load(); c != nil && (code == codes.Internal || code == codes.Unknown) {
			ev = ev.AnErr("cause", *c) // the operator's log may name server paths
		}
	}
	ev.Msg("rpc")
}

// maxLoggedAction is as much of an action type as the log line keeps: the
// type is the client's, and a known one is far shorter.
const maxLoggedAction = 256

// clip is s cut to at most n bytes (and "…"), on a UTF-8 boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
