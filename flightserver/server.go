package flightserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	flightgen "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"

	"github.com/quiverdb/quiver/catalog"
	"github.com/quiverdb/quiver/store"
)

// Defaults of the limits; each has an Option.
const (
	// DefaultMaxRecvMsgSize is the largest message a client may send (one
	// IPC batch of a DoPut). pyarrow sends a batch as one message, so it
	// must be well above grpc-go's 4 MiB default: a 64 MiB batch passes.
	// Every receive that a message may be arriving for reserves this much
	// of the in-flight budget (DefaultMaxInflightBytes), so it also sets
	// how many messages arrive at once: 4 with the defaults.
	DefaultMaxRecvMsgSize = 128 << 20
	// DefaultMaxSendMsgSize is the size DoGet keeps each message under by
	// slicing batches: grpc-go clients receive at most 4 MiB by default.
	DefaultMaxSendMsgSize = 4 << 20
	// DefaultGrace is the default grace period of remove-old-versions:
	// catalog.DefaultGrace, the wire contract's.
	DefaultGrace = catalog.DefaultGrace
	// DefaultSweepAge is the default age threshold of sweep:
	// catalog.DefaultSweepAge.
	DefaultSweepAge = catalog.DefaultSweepAge
)

// flightServiceName is the gRPC name of the Flight service, for health
// checks of that service.
const flightServiceName = "arrow.flight.protocol.FlightService"

// Server is the Flight service over one store. It embeds
// flight.BaseFlightServer, so RPCs it does not implement answer
// Unimplemented.
type Server struct {
	flight.BaseFlightServer

	st        *store.Store
	cat       *catalog.Catalog
	opts      options
	grpc      *grpc.Server
	health    *health.Server
	metrics   *metrics
	budget    *budget // the data pool
	reqBudget *budget // the request pool
	pw        *passwordGate
	// unary names the methods declared unary that are registered as
	// streams (see streamify).
	unary map[string]bool
}

type options struct {
	log           zerolog.Logger
	mem           memory.Allocator
	maxRecv       int
	maxSend       int
	endpointBytes int64
	grace         time.Duration
	sweepAge      time.Duration
	now           func() time.Time
	grpcOpts      []grpc.ServerOption
	auth          *Authenticator
	idleTimeout   time.Duration
	sendTimeout   time.Duration
	maxStreams    uint32
	maxColumns    int
	maxDepth      int
	maxInflight   int64
	inflightWait  time.Duration
	pwLimits      PasswordLimits
	maxConnIdle   time.Duration
	maxConns      int
	dormantAfter  time.Duration
	testHook      func(point string)
	onRecvConn    func(*recvConn) // tests: sees each watched connection
}

// Option configures a Server.
type Option func(*options)

// WithLogger sets the logger for the per-RPC lines (default: none).
func WithLogger(l zerolog.Logger) Option { return func(o *options) { o.log = l } }

// WithAllocator sets the Arrow allocator for DoPut decoding and DoGet
// encoding (tests pass a checked allocator).
func WithAllocator(mem memory.Allocator) Option { return func(o *options) { o.mem = mem } }

// WithMaxRecvMsgSize sets the largest message a client may send
// (default DefaultMaxRecvMsgSize). A larger one fails with
// ResourceExhausted.
func WithMaxRecvMsgSize(n int) Option { return func(o *options) { o.maxRecv = n } }

// WithMaxSendMsgSize sets the size DoGet keeps each batch message under
// (default DefaultMaxSendMsgSize).
func WithMaxSendMsgSize(n int) Option { return func(o *options) { o.maxSend = n } }

// WithEndpointBytes sets the target size of one GetFlightInfo endpoint.
func WithEndpointBytes(n int64) Option { return func(o *options) { o.endpointBytes = n } }

// WithGrace sets the default grace period of remove-old-versions.
func WithGrace(d time.Duration) Option { return func(o *options) { o.grace = d } }

// WithSweepAge sets the default age threshold of sweep.
func WithSweepAge(d time.Duration) Option { return func(o *options) { o.sweepAge = d } }

// WithClock replaces time.Now for the durations in log lines, for tests.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithGRPCOptions adds options to the gRPC server (TLS credentials, …).
func WithGRPCOptions(opts ...grpc.ServerOption) Option {
	return func(o *options) { o.grpcOpts = append(o.grpcOpts, opts...) }
}

// WithAuth requires every RPC but health checks to authenticate against
// a (bearer token or basic-auth handshake). Without it every caller is an
// anonymous admin: cmd/quiver allows that only on a loopback address.
func WithAuth(a *Authenticator) Option { return func(o *options) { o.auth = a } }

// WithIdleTimeout sets how long a DoPut or DoGet stream may go without a
// message before it is cancelled (default DefaultIdleTimeout; 0: never).
func WithIdleTimeout(d time.Duration) Option { return func(o *options) { o.idleTimeout = d } }

// WithMaxConcurrentStreams sets how many RPCs one connection may have open
// at once (default DefaultMaxConcurrentStreams).
func WithMaxConcurrentStreams(n uint32) Option { return func(o *options) { o.maxStreams = n } }

// WithMaxColumns sets the most leaf columns a put's schema may have
// (default DefaultMaxColumns).
func WithMaxColumns(n int) Option { return func(o *options) { o.maxColumns = n } }

// WithMaxDepth sets the deepest nesting a put's schema may have (default
// DefaultMaxDepth).
func WithMaxDepth(n int) Option { return func(o *options) { o.maxDepth = n } }

// WithMaxInflightBytes sets the server-wide budget of inbound message
// bytes (default DefaultMaxInflightBytes; 0 or less: no budget). It is
// raised to the receive message limit if below it.
func WithMaxInflightBytes(n int64) Option { return func(o *options) { o.maxInflight = n } }

// WithInflightWait sets how long a receive waits for room in the in-flight
// budget before failing with ResourceExhausted (default
// DefaultInflightWait).
func WithInflightWait(d time.Duration) Option { return func(o *options) { o.inflightWait = d } }

// WithSendTimeout sets how long a DoGet may wait to hand one message to a
// client that does not read before it is cancelled (default
// DefaultSendTimeout; 0: only the idle timeout applies).
func WithSendTimeout(d time.Duration) Option { return func(o *options) { o.sendTimeout = d } }

// WithPasswordLimits bounds the work of basic-auth handshakes (default
// DefaultPasswordLimits).
func WithPasswordLimits(l PasswordLimits) Option { return func(o *options) { o.pwLimits = l } }

// New returns a Server over st with its gRPC server built: the Flight
// service and the standard health service registered, logging, auth and
// limit interceptors installed.
func New(st *store.Store, opts ...Option) *Server {
	o := options{
		log:           zerolog.Nop(),
		mem:           memory.DefaultAllocator,
		maxRecv:       DefaultMaxRecvMsgSize,
		maxSend:       DefaultMaxSendMsgSize,
		endpointBytes: 256 << 20,
		grace:         DefaultGrace,
		sweepAge:      DefaultSweepAge,
		now:           time.Now,
		idleTimeout:   DefaultIdleTimeout,
		sendTimeout:   DefaultSendTimeout,
		maxStreams:    DefaultMaxConcurrentStreams,
		maxColumns:    DefaultMaxColumns,
		maxDepth:      DefaultMaxDepth,
		maxInflight:   DefaultMaxInflightBytes,
		inflightWait:  DefaultInflightWait,
		pwLimits:      DefaultPasswordLimits,
		maxConnIdle:   DefaultMaxConnectionIdle,
		maxConns:      DefaultMaxConnections,
		dormantAfter:  defaultDormantAfter,
	}
	for _, opt := range opts {
		opt(&o)
	}
	if o.maxInflight > 0 && o.maxInflight < int64(o.maxRecv) {
		o.maxInflight = int64(o.maxRecv)
	}
	// Batches are aimed at 5/8 of the send limit, below DoGet's target of
	// ¾, leaving room for the error of the row-size estimate.
	cat := catalog.New(st, catalog.WithEndpointBytes(o.endpointBytes), catalog.WithAllocator(o.mem),
		catalog.WithBatchBytes(int64(o.maxSend)*5/8))
	s := &Server{
		st:      st,
		cat:     cat,
		opts:    o,
		metrics: newMetrics(),
		unary:   map[string]bool{},
	}
	s.budget = newBudget("data", "--max-inflight-bytes", o.maxInflight, o.inflightWait, s.metrics)
	if s.budget != nil {
		s.reqBudget = newBudget("request", "its request pool, 2 × --max-recv-msg-size", requestPoolMessages*int64(o.maxRecv), o.inflightWait, s.metrics)
	}
	s.pw = newPasswordGate(o.pwLimits, s.metrics)
	st.OnLockWait(s.metrics.lockWait)
	if c := st.Cache(); c != nil {
		s.metrics.registerCache(c)
	}
	// Logging is outermost so that refused RPCs are logged and counted too;
	// recovery next, so a panic anywhere below (auth included) becomes an
	// Internal status that is logged; the in-flight budget after auth, so
	// a caller without credentials never gets a message read; the idle
	// guard innermost, around the handler's own stream use. The static
	// windows bound what a stream buffers while nothing reads it.
	gopts := append([]grpc.ServerOption{
		grpc.ForceServerCodecV2(newSendCodec()), // DoGet batches sent and DoPut bodies decoded without a copy
		grpc.MaxRecvMsgSize(o.maxRecv),
		grpc.WriteBufferSize(writeBuffer), // shared between flushes: grpc-go's default
		grpc.MaxConcurrentStreams(o.maxStreams),
		grpc.StaticStreamWindowSize(streamWindow),
		grpc.StaticConnWindowSize(connWindow),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: o.maxConnIdle}),
		grpc.ChainUnaryInterceptor(s.unaryLog, s.unaryRecover, s.unaryAuth),
		grpc.ChainStreamInterceptor(s.streamLog, s.streamRecover, s.streamAuth, s.streamInflight, s.streamIdle),
	}, o.grpcOpts...)
	s.grpc = grpc.NewServer(gopts...)
	s.grpc.RegisterService(streamify(flightgen.FlightService_ServiceDesc, s.unary), s)
	s.health = health.NewServer()
	s.grpc.RegisterService(healthService(s.health), s.health)
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	s.health.SetServingStatus(flightServiceName, healthpb.HealthCheckResponse_SERVING)
	return s
}

// Serving reports whether the server answers SERVING to health checks
// (false once Stop began).
func (s *Server) Serving() bool {
	res, err := s.health.Check(context.Background(), &healthpb.HealthCheckRequest{})
	return err == nil && res.GetStatus() == healthpb.HealthCheckResponse_SERVING
}

// GRPCServer is the underlying gRPC server, for registering more services.
func (s *Server) GRPCServer() *grpc.Server { return s.grpc }

// Serve accepts connections on lis until Stop, at most the connection
// limit at once (WithMaxConnections). It returns nil after a
// graceful stop.
func (s *Server) Serve(lis net.Listener) error {
	ll := newLimitListener(lis, s.opts.maxConns, s.metrics)
	if s.budget != nil && s.opts.dormantAfter > 0 {
		reserve := min(int64(s.opts.maxRecv), s.budget.capacity)
		ll.wrap = func(c net.Conn) net.Conn {
			rc := newRecvConn(c, s.budget, reserve, s.opts.dormantAfter)
			if s.opts.onRecvConn != nil {
				s.opts.onRecvConn(rc)
			}
			return rc
		}
	}
	err := s.grpc.Serve(ll)
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// Stop stops accepting RPCs, reports NOT_SERVING to health checks, and
// lets in-flight RPCs finish until ctx ends; then it cancels them (an
// interrupted put commits nothing). It reports whether the stop was
// graceful.
func (s *Server) Stop(ctx context.Context) bool {
	s.health.Shutdown()
	done := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		s.grpc.Stop()
		<-done
		return false
	}
}
