package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// defaultServer is where client subcommands connect unless told otherwise;
// it is `quiver serve`'s default address.
const defaultServer = "localhost:8815"

// clientMaxRecvMsgSize is how large one message from the server may be.
// The server slices DoGet batches to 4 MiB by default, but an operator may
// raise --max-send-msg-size; a client should not be the one to fail.
const clientMaxRecvMsgSize = 256 << 20

// connFlags are the flags every subcommand that talks to a server takes.
type connFlags struct {
	server             string
	token              string
	tlsCA              string
	tlsCert            string
	tlsKey             string
	insecureSkipVerify bool
}

func addConnFlags(cmd *cobra.Command, c *connFlags) {
	f := cmd.Flags()
	f.StringVar(&c.server, "server", env("QUIVER_SERVER", defaultServer),
		"server address host:port, or grpc://host:port, grpc+tls://host:port (env QUIVER_SERVER)")
	f.StringVar(&c.token, "token", "", "bearer token sent as \"authorization: Bearer …\" (env QUIVER_TOKEN)")
	f.StringVar(&c.tlsCA, "tls-ca", "", "PEM file of the CA that signed the server's certificate (turns on TLS)")
	f.StringVar(&c.tlsCert, "tls-cert", "", "PEM client certificate for mutual TLS (with --tls-key)")
	f.StringVar(&c.tlsKey, "tls-key", "", "PEM private key of --tls-cert")
	f.BoolVar(&c.insecureSkipVerify, "tls-insecure-skip-verify", false, "TLS without checking the server's certificate (testing only)")
}

// tokenValue is the flag, else QUIVER_TOKEN. The token is not a flag
// default, so `--help` never prints it.
func (c *connFlags) tokenValue() string {
	if c.token != "" {
		return c.token
	}
	return os.Getenv("QUIVER_TOKEN")
}

// target splits --server into a gRPC target and whether TLS was asked for
// by its scheme.
func (c *connFlags) target() (string, bool, error) {
	s := strings.TrimSpace(c.server)
	useTLS := false
	switch {
	case strings.HasPrefix(s, "grpc+tls://"):
		s, useTLS = strings.TrimPrefix(s, "grpc+tls://"), true
	case strings.HasPrefix(s, "grpc+tcp://"):
		s = strings.TrimPrefix(s, "grpc+tcp://")
	case strings.HasPrefix(s, "grpc://"):
		s = strings.TrimPrefix(s, "grpc://")
	case strings.Contains(s, "://"):
		return "", false, fmt.Errorf("--server %q: want host:port, grpc://host:port or grpc+tls://host:port", c.server)
	}
	s = strings.TrimSuffix(s, "/")
	if s == "" {
		return "", false, errors.New("--server is empty")
	}
	return s, useTLS, nil
}

// transport builds the transport credentials: TLS when any TLS flag or the
// grpc+tls scheme asks for it, plaintext otherwise.
func (c *connFlags) transport(useTLS bool) (credentials.TransportCredentials, bool, error) {
	if !useTLS && c.tlsCA == "" && c.tlsCert == "" && c.tlsKey == "" && !c.insecureSkipVerify {
		return insecure.NewCredentials(), false, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: c.insecureSkipVerify} //nolint:gosec // only when asked for
	if c.tlsCA != "" {
		pem, err := os.ReadFile(c.tlsCA)
		if err != nil {
			return nil, false, fmt.Errorf("--tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, false, fmt.Errorf("--tls-ca %s: no PEM certificate in it", c.tlsCA)
		}
		cfg.RootCAs = pool
	}
	if (c.tlsCert == "") != (c.tlsKey == "") {
		return nil, false, errors.New("--tls-cert and --tls-key go together")
	}
	if c.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(c.tlsCert, c.tlsKey)
		if err != nil {
			return nil, false, fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return credentials.NewTLS(cfg), true, nil
}

// bearer sends the token with every RPC.
type bearer struct {
	token string
}

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

// RequireTransportSecurity is false so that a token also works against a
// plaintext server on loopback (the server decides whether it accepts that).
func (b bearer) RequireTransportSecurity() bool { return false }

// dial connects a Flight client. grpc.NewClient connects lazily: an
// unreachable server shows up as Unavailable on the first RPC.
func (c *connFlags) dial() (flight.Client, error) {
	target, useTLS, err := c.target()
	if err != nil {
		return nil, err
	}
	creds, _, err := c.transport(useTLS)
	if err != nil {
		return nil, err
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(clientMaxRecvMsgSize)),
	}
	if tok := c.tokenValue(); tok != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer{token: tok}))
	}
	cl, err := flight.NewClientWithMiddleware(target, nil, nil, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", target, err)
	}
	return cl, nil
}

// clientError turns an error into the one line a person should read: for a
// gRPC status its message (not "rpc error: code = … desc = …"), with a hint
// when the server cannot be reached or refuses the credentials.
func clientError(err error, c *connFlags) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) {
		return errors.New("interrupted")
	}
	// The status may be wrapped (status.FromError would then answer the
	// whole chain as its message): take the status itself.
	var se interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &se) {
		return err
	}
	st := se.GRPCStatus()
	msg := st.Message()
	switch st.Code() {
	case codes.Unavailable:
		if strings.Contains(msg, "connection") || strings.Contains(msg, "dial") || strings.Contains(msg, "transport") {
			return fmt.Errorf("cannot reach a quiver server at %s (is `quiver serve` running? set --server or QUIVER_SERVER)", c.server)
		}
	case codes.Unauthenticated:
		return fmt.Errorf("%s (set --token or QUIVER_TOKEN)", msg)
	case codes.Canceled:
		return errors.New("interrupted")
	case codes.DeadlineExceeded:
		return fmt.Errorf("timed out: %s", msg)
	}
	if msg == "" {
		msg = st.Code().String()
	}
	return errors.New(msg)
}

// signalContext is cancelled by SIGINT or SIGTERM, so an interrupted put
// cancels its stream (and commits nothing) instead of dying mid-write.
func signalContext(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
}
