package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/quiverdb/quiver/internal/flightwire"
)

// Defaults of the options.
const (
	// DefaultMaxRecvMsgSize is the largest message the client accepts. The
	// server slices DoGet batches to 4 MiB by default, but an operator may
	// raise its --max-send-msg-size; the client should not be the one to
	// fail.
	DefaultMaxRecvMsgSize = 256 << 20
	// DefaultMaxBatchBytes is the size above which a put slices a batch
	// into several messages: 4 MiB, the size the server's DoGet messages
	// keep under, well under its receive limit (--max-recv-msg-size, 128
	// MiB by default) and under one an operator lowered it to, whatever
	// the reader's batches. Puts are no slower for it (the messages of
	// one stream are pipelined).
	DefaultMaxBatchBytes = 4 << 20
	// DefaultParallel is how many endpoints ReadParallel fetches at once
	// when asked for 0.
	DefaultParallel = 4
)

// Client talks to one Quiver server. It is safe for concurrent use.
type Client struct {
	fc     flight.Client
	target string
	opts   options
}

type options struct {
	token              string
	user, password     string
	useTLS             bool
	tlsConfig          *tls.Config
	caFile             string
	caPool             *x509.CertPool
	certFile, keyFile  string
	cert               *tls.Certificate
	insecureSkipVerify bool
	maxRecv            int
	maxBatchBytes      int64
	dialOpts           []grpc.DialOption
	mem                memory.Allocator
	retry              RetryPolicy
}

// Option configures a Client.
type Option func(*options)

// WithToken sends "authorization: Bearer tok" with every call.
func WithToken(tok string) Option { return func(o *options) { o.token = tok } }

// WithBasicAuth logs in with the basic-auth handshake when connecting and
// sends the session token the server answers with every call.
func WithBasicAuth(user, password string) Option {
	return func(o *options) { o.user, o.password = user, password }
}

// WithTLS turns TLS on, verifying the server against the system's roots
// unless WithCAFile or WithCAPool says otherwise. Every TLS option, and a
// grpc+tls:// address, turns TLS on.
func WithTLS() Option { return func(o *options) { o.useTLS = true } }

// WithTLSConfig uses cfg (cloned) for TLS; the other TLS options add to it.
func WithTLSConfig(cfg *tls.Config) Option {
	return func(o *options) { o.useTLS, o.tlsConfig = true, cfg }
}

// WithCAFile verifies the server's certificate against the CA
// certificates in a PEM file.
func WithCAFile(path string) Option { return func(o *options) { o.useTLS, o.caFile = true, path } }

// WithCAPool verifies the server's certificate against pool.
func WithCAPool(pool *x509.CertPool) Option {
	return func(o *options) { o.useTLS, o.caPool = true, pool }
}

// WithClientCertFiles presents a client certificate (mutual TLS) from PEM
// files of the certificate and its key.
func WithClientCertFiles(certFile, keyFile string) Option {
	return func(o *options) { o.useTLS, o.certFile, o.keyFile = true, certFile, keyFile }
}

// WithClientCertificate presents cert (mutual TLS).
func WithClientCertificate(cert tls.Certificate) Option {
	return func(o *options) { o.useTLS, o.cert = true, &cert }
}

// WithInsecureSkipVerify uses TLS without checking the server's
// certificate. For tests only.
func WithInsecureSkipVerify() Option {
	return func(o *options) { o.useTLS, o.insecureSkipVerify = true, true }
}

// WithMaxRecvMsgSize sets the largest message the client accepts (default
// DefaultMaxRecvMsgSize).
func WithMaxRecvMsgSize(n int) Option { return func(o *options) { o.maxRecv = n } }

// WithMaxBatchBytes sets the size above which a put slices a batch
// (default DefaultMaxBatchBytes; 0 or less: never). Slices are cut by row
// count in proportion to the batch's size, so a slice of rows much wider
// than the batch's average can be larger; a single row is never cut. A
// message over the server's limit fails the put with a
// *MessageTooLargeError.
func WithMaxBatchBytes(n int64) Option { return func(o *options) { o.maxBatchBytes = n } }

// WithDialOptions adds gRPC dial options (interceptors, a custom dialer,
// keepalives). They come after the client's own and may override them.
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(o *options) { o.dialOpts = append(o.dialOpts, opts...) }
}

// WithAllocator sets the allocator for the batches the client decodes and
// encodes (default memory.DefaultAllocator; tests pass a checked one).
func WithAllocator(mem memory.Allocator) Option { return func(o *options) { o.mem = mem } }

// WithRetry sets the retry policy of puts (default DefaultRetry);
// PutOptions.Retry overrides it for one put.
func WithRetry(p RetryPolicy) Option { return func(o *options) { o.retry = p } }

// Connect returns a client of the server at addr: "host:port",
// "grpc://host:port" (plaintext unless a TLS option is given) or
// "grpc+tls://host:port". The connection is made lazily, so an unreachable
// server is codes.Unavailable on the first call; only WithBasicAuth calls
// the server here (its login), within ctx.
func Connect(ctx context.Context, addr string, opts ...Option) (*Client, error) {
	o := options{
		maxRecv:       DefaultMaxRecvMsgSize,
		maxBatchBytes: DefaultMaxBatchBytes,
		mem:           memory.DefaultAllocator,
		retry:         DefaultRetry,
	}
	for _, opt := range opts {
		opt(&o)
	}
	target, schemeTLS, err := ParseAddress(addr)
	if err != nil {
		return nil, err
	}
	if schemeTLS {
		o.useTLS = true
	}
	if o.token != "" && o.user != "" {
		return nil, fmt.Errorf("%w: a token and a basic-auth login both given", ErrInvalidOption)
	}
	creds, err := o.transport()
	if err != nil {
		return nil, err
	}
	tok := &bearer{}
	tok.token.Store(o.token)
	dial := append([]grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		// flightwire's codec: a small put's batch is not marshalled into a
		// zeroed 1 MiB buffer, a DoGet batch not copied out of one.
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(o.maxRecv), grpc.ForceCodecV2(flightwire.NewCodec())),
		grpc.WithPerRPCCredentials(tok),
	}, o.dialOpts...)
	fc, err := flight.NewClientWithMiddleware(target, nil, nil, dial...)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", target, err)
	}
	c := &Client{fc: fc, target: target, opts: o}
	if o.user != "" {
		authed, err := fc.AuthenticateBasicToken(ctx, o.user, o.password)
		if err != nil {
			_ = fc.Close()
			return nil, err
		}
		md, _ := metadata.FromOutgoingContext(authed)
		vals := md.Get("authorization")
		scheme, t, ok := strings.Cut(lastOf(vals), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || t == "" {
			_ = fc.Close()
			return nil, fmt.Errorf("%w: the server's login answered no bearer token", ErrUnexpectedResult)
		}
		tok.token.Store(t)
	}
	return c, nil
}

func lastOf(vals []string) string {
	if len(vals) == 0 {
		return ""
	}
	return vals[len(vals)-1]
}

// ParseAddress splits an address as Connect takes it into the gRPC target
// and whether its scheme asks for TLS.
func ParseAddress(addr string) (target string, useTLS bool, err error) {
	s := strings.TrimSpace(addr)
	switch {
	case strings.HasPrefix(s, "grpc+tls://"):
		s, useTLS = strings.TrimPrefix(s, "grpc+tls://"), true
	case strings.HasPrefix(s, "grpc+tcp://"):
		s = strings.TrimPrefix(s, "grpc+tcp://")
	case strings.HasPrefix(s, "grpc://"):
		s = strings.TrimPrefix(s, "grpc://")
	case strings.Contains(s, "://"):
		return "", false, fmt.Errorf("%w %q: want host:port, grpc://host:port or grpc+tls://host:port", ErrInvalidAddress, addr)
	}
	s = strings.TrimSuffix(s, "/")
	if s == "" {
		return "", false, ErrEmptyAddress
	}
	if strings.Contains(s, "://") {
		return "", false, fmt.Errorf("%w %q: want host:port, grpc://host:port or grpc+tls://host:port", ErrInvalidAddress, addr)
	}
	return s, useTLS, nil
}

// transport builds the transport credentials: TLS when asked for,
// plaintext otherwise.
func (o *options) transport() (credentials.TransportCredentials, error) {
	if !o.useTLS {
		return insecure.NewCredentials(), nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.tlsConfig != nil {
		cfg = o.tlsConfig.Clone()
	}
	if o.insecureSkipVerify {
		cfg.InsecureSkipVerify = true //nolint:gosec // only when asked for
	}
	if o.caPool != nil {
		cfg.RootCAs = o.caPool
	}
	if o.caFile != "" {
		pem, err := os.ReadFile(o.caFile)
		if err != nil {
			return nil, fmt.Errorf("%w: CA file: %w", ErrInvalidOption, err)
		}
		pool := cfg.RootCAs
		if pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: CA file %s: no PEM certificate in it", ErrInvalidOption, o.caFile)
		}
		cfg.RootCAs = pool
	}
	if o.cert != nil {
		cfg.Certificates = append(cfg.Certificates, *o.cert)
	}
	if (o.certFile == "") != (o.keyFile == "") {
		return nil, fmt.Errorf("%w: a client certificate file needs its key file", ErrInvalidOption)
	}
	if o.certFile != "" {
		pair, err := tls.LoadX509KeyPair(o.certFile, o.keyFile)
		if err != nil {
			return nil, fmt.Errorf("%w: client certificate: %w", ErrInvalidOption, err)
		}
		cfg.Certificates = append(cfg.Certificates, pair)
	}
	return credentials.NewTLS(cfg), nil
}

// bearer sends the token with every call; no token, no header.
type bearer struct {
	token atomic.Value // string
}

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (b *bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	t, _ := b.token.Load().(string)
	if t == "" {
		return nil, nil
	}
	return map[string]string{"authorization": "Bearer " + t}, nil
}

// RequireTransportSecurity is false so that a token also works against a
// plaintext server on loopback (the server decides whether it accepts
// that).
func (b *bearer) RequireTransportSecurity() bool { return false }

// Target is the gRPC target the client connects to ("host:port").
func (c *Client) Target() string { return c.target }

// Flight is the underlying Flight client, for what this package does not
// wrap (raw streams, other RPCs). It is closed by Close.
func (c *Client) Flight() flight.Client { return c.fc }

// Close closes the connection. Calls in flight fail with codes.Canceled.
func (c *Client) Close() error { return c.fc.Close() }
