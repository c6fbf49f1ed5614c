package flightserver

import (
	"context"
	"errors"
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
	err := h(srv, &decodeStream{ServerStream: ss, ctx: context.WithValue(ss.Context(), rpcKey{}, ri), one: singleRequest[si.FullMethod]})
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
