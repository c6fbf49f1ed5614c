package flightserver

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// TLSFiles name the PEM files of the server's TLS setup.
type TLSFiles struct {
	// CertFile and KeyFile are the server's certificate (chain) and key.
	CertFile, KeyFile string
	// ClientCAFile, when set, turns on mutual TLS: every client must
	// present a certificate signed by one of these CAs.
	ClientCAFile string
}

// Certificates serves the server certificate and reloads it on demand
// (on SIGHUP, with the auth file), so a renewed certificate is picked up
// without a restart.
type Certificates struct {
	files TLSFiles
	cert  atomic.Pointer[tls.Certificate]
}

// LoadTLS reads the files and returns the TLS configuration for the
// server and the certificate holder for reloads. TLS 1.2 is the minimum.
func LoadTLS(f TLSFiles) (*tls.Config, *Certificates, error) {
	if f.CertFile == "" || f.KeyFile == "" {
		return nil, nil, errors.New("tls: both a certificate and a key are needed")
	}
	c := &Certificates{files: f}
	if err := c.Reload(); err != nil {
		return nil, nil, err
	}
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return c.cert.Load(), nil
		},
	}
	if f.ClientCAFile != "" {
		pem, err := os.ReadFile(f.ClientCAFile)
		if err != nil {
			return nil, nil, fmt.Errorf("tls client CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, nil, fmt.Errorf("tls client CA %s: no PEM certificate in it", f.ClientCAFile)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, c, nil
}

// Reload reads the certificate and key again; on error the current pair
// stays in use.
func (c *Certificates) Reload() error {
	pair, err := tls.LoadX509KeyPair(c.files.CertFile, c.files.KeyFile)
	if err != nil {
		return fmt.Errorf("tls certificate: %w", err)
	}
	c.cert.Store(&pair)
	return nil
}

// WithTLS serves over TLS with cfg (from LoadTLS). A paused put's
// connection is watched above the TLS layer (dormantCreds).
func WithTLS(cfg *tls.Config) Option {
	return WithGRPCOptions(grpc.Creds(dormantCreds{credentials.NewTLS(cfg)}))
}
