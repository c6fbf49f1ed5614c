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

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/quiverdb/quiver/client"
	"github.com/quiverdb/quiver/flightserver"
)

// defaultServer is where client subcommands connect unless told otherwise;
// it is `quiver serve`'s default address.
const defaultServer = "localhost:8815"

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

// connect makes the client the flags describe, with extra options (a
// command's own) after them. Flag errors name the flag; the connection
// itself is made lazily (an unreachable server shows up as Unavailable on
// the first call).
func (c *connFlags) connect(ctx context.Context, extra ...client.Option) (*client.Client, error) {
	if _, _, err := client.ParseAddress(c.server); err != nil {
		if errors.Is(err, client.ErrEmptyAddress) {
			return nil, errors.New("--server is empty")
		}
		return nil, fmt.Errorf("--server %q: want host:port, grpc://host:port or grpc+tls://host:port", c.server)
	}
	var opts []client.Option
	if tok := c.tokenValue(); tok != "" {
		opts = append(opts, client.WithToken(tok))
	}
	if c.insecureSkipVerify {
		opts = append(opts, client.WithInsecureSkipVerify())
	}
	if c.tlsCA != "" {
		pem, err := os.ReadFile(c.tlsCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-ca %s: no PEM certificate in it", c.tlsCA)
		}
		opts = append(opts, client.WithCAPool(pool))
	}
	if (c.tlsCert == "") != (c.tlsKey == "") {
		return nil, errors.New("--tls-cert and --tls-key go together")
	}
	if c.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(c.tlsCert, c.tlsKey)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		opts = append(opts, client.WithClientCertificate(cert))
	}
	return client.Connect(ctx, c.server, append(opts, extra...)...)
}

// clientError turns an error into the one line a person should read: for a
// gRPC status its message (not "rpc error: code = … desc = …"), with a hint
// when the server cannot be reached or refuses the credentials.
func clientError(err error, c *connFlags) error {
	if err == nil {
		return nil
	}
	var h *hintError
	if errors.As(err, &h) {
		return fmt.Errorf("%w (%s)", clientError(h.err, c), h.hint)
	}
	if errors.Is(err, context.Canceled) {
		return errors.New("interrupted")
	}
	// The status may be wrapped (status.FromError would then answer the
	// whole chain as its message): take the status itself.
	var se interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &se) {
		// A local error (offline admin commands work on the store
		// directly): the same wording a server would send.
		return errors.New(flightserver.PublicMessage(err))
	}
	st := se.GRPCStatus()
	msg := st.Message()
	switch st.Code() {
	case codes.Unavailable:
		// (Not the server's own answer that its storage did not answer,
		// whose message quotes the storage's "connection reset": red team
		// round 49.)
		if (strings.Contains(msg, "connection") || strings.Contains(msg, "dial") || strings.Contains(msg, "transport")) && !strings.Contains(msg, "storage") {
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
