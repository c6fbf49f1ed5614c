package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/quiverdb/quiver/flightserver"
)

// security is what serve sets up for auth, TLS and metrics.
type security struct {
	opts  []flightserver.Option
	auth  *flightserver.Authenticator
	certs *flightserver.Certificates
}

// setupSecurity loads the auth file and TLS files named by the flags.
func setupSecurity(c serveConfig, log zerolog.Logger) (*security, error) {
	sec := &security{}
	if c.authFile != "" {
		a, err := flightserver.LoadAuthenticator(c.authFile, flightserver.WithSessionTTL(c.sessionTTL), flightserver.WithLoginCacheTTL(c.loginCacheTTL))
		if err != nil {
			return nil, fmt.Errorf("--auth-file: %w", err)
		}
		users, tokens := a.Counts()
		log.Info().Str("auth_file", c.authFile).Int("users", users).Int("tokens", tokens).Msg("auth enabled")
		sec.auth = a
		sec.opts = append(sec.opts, flightserver.WithAuth(a))
	}
	if c.tlsCert != "" || c.tlsKey != "" || c.tlsClientCA != "" {
		if c.tlsCert == "" || c.tlsKey == "" {
			return nil, errors.New("--tls-cert and --tls-key go together (and --tls-client-ca needs both)")
		}
		cfg, certs, err := flightserver.LoadTLS(flightserver.TLSFiles{CertFile: c.tlsCert, KeyFile: c.tlsKey, ClientCAFile: c.tlsClientCA})
		if err != nil {
			return nil, err
		}
		sec.certs = certs
		sec.opts = append(sec.opts, flightserver.WithTLS(cfg))
		log.Info().Bool("mutual", c.tlsClientCA != "").Msg("tls enabled")
	}
	return sec, nil
}

// checkExposure refuses to serve without auth on an address other
// clients can reach, unless --insecure-no-auth says so; without auth it
// warns loudly, once: in the log, or on stderr when the log level hides
// warnings. It runs before listening, so a refused address is never bound.
func checkExposure(c serveConfig, sec *security, log zerolog.Logger, stderr io.Writer) error {
	if sec.auth != nil {
		return nil
	}
	var msg string
	switch {
	case isLoopback(c.addr):
		msg = "NO AUTHENTICATION: every client on this machine is an anonymous admin; give --auth-file to require credentials"
	case c.insecureNoAuth:
		msg = "NO AUTHENTICATION on a non-loopback address (--insecure-no-auth): anyone who can reach it is an anonymous admin"
	default:
		return fmt.Errorf("refusing to serve %s without authentication: give --auth-file, bind a loopback address, or pass --insecure-no-auth", c.addr)
	}
	if ev := log.Warn(); ev.Enabled() {
		ev.Str("addr", c.addr).Msg(msg)
	} else {
		fmt.Fprintf(stderr, "quiver: WARNING: %s (%s)\n", msg, c.addr)
	}
	return nil
}

// isLoopback reports whether every address host:port may bind is a
// loopback address ("localhost", 127.0.0.0/8, ::1). An empty host binds
// every interface.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return false
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback()
	}
	if host == "localhost" {
		return true
	}
	ips, err := net.LookupIP(host)
	if err != nil || len(ips) == 0 {
		return false
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			return false
		}
	}
	return true
}

// reloadOnHUP reloads the auth file and the TLS certificate on SIGHUP
// until ctx ends. A file that fails to load leaves the old one in force.
func reloadOnHUP(ctx context.Context, sec *security, log zerolog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
			}
			if sec.auth != nil {
				if err := sec.auth.Reload(); err != nil {
					log.Error().Err(err).Msg("SIGHUP: auth file not reloaded; the previous one stays in force")
				} else {
					users, tokens := sec.auth.Counts()
					log.Info().Int("users", users).Int("tokens", tokens).Msg("SIGHUP: auth file reloaded")
				}
			}
			if sec.certs != nil {
				if err := sec.certs.Reload(); err != nil {
					log.Error().Err(err).Msg("SIGHUP: TLS certificate not reloaded; the previous one stays in use")
				} else {
					log.Info().Msg("SIGHUP: TLS certificate reloaded")
				}
			}
		}
	}()
}

// startMetrics serves /metrics (Prometheus) and /healthz on addr, and with
// withPprof Go's /debug/pprof/ profiles. The returned func shuts it down.
func startMetrics(addr string, withPprof bool, srv *flightserver.Server, log zerolog.Logger, stdout io.Writer) (func(context.Context), error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", srv.MetricsHandler())
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if !srv.Serving() {
			http.Error(w, "not serving", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	if withPprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := hs.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Msg("metrics server")
		}
	}()
	log.Info().Str("metrics_addr", lis.Addr().String()).Msg("serving metrics")
	fmt.Fprintf(stdout, "quiver: metrics on http://%s/metrics\n", lis.Addr())
	return func(ctx context.Context) { _ = hs.Shutdown(ctx) }, nil
}
