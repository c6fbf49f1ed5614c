package flightserver

import (
	"context"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// rpcInfo is what a handler tells the log line about its RPC.
type rpcInfo struct {
	profile atomic.Value // string
	action  atomic.Value // string
	rows    atomic.Int64
	bytes   atomic.Int64
	cause   atomic.Value // error: the error behind an Internal status
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
	info(ctx).cause.Store(err)
	return statusOf(err)
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
	err := h(srv, &wrappedStream{ServerStream: ss, ctx: context.WithValue(ss.Context(), rpcKey{}, ri)})
	s.logRPC(ss.Context(), si.FullMethod, ri, start, err)
	return err
}

// logRPC writes the one line per RPC: method, profile, rows, bytes,
// duration, peer, status.
func (s *Server) logRPC(ctx context.Context, method string, ri *rpcInfo, start time.Time, err error) {
	code := status.Code(err)
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
	name := method[strings.LastIndexByte(method, '/')+1:]
	ev = ev.Str("method", name)
	if p, ok := ri.profile.Load().(string); ok && p != "" {
		ev = ev.Str("profile", p)
	}
	if a, ok := ri.action.Load().(string); ok && a != "" {
		ev = ev.Str("action", a)
	}
	ev = ev.Int64("rows", ri.rows.Load()).Int64("bytes", ri.bytes.Load())
	ev = ev.Dur("duration", s.opts.now().Sub(start))
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		ev = ev.Str("peer", p.Addr.String())
	}
	ev = ev.Str("status", code.String())
	if err != nil {
		ev = ev.Str("error", status.Convert(err).Message())
		if c, ok := ri.cause.Load().(error); ok && (code == codes.Internal || code == codes.Unknown) {
			ev = ev.AnErr("cause", c) // the operator's log may name server paths
		}
	}
	ev.Msg("rpc")
}
