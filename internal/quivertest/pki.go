package quivertest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// PKI is a test CA with a server certificate for 127.0.0.1 and a client
// certificate (common name "etl-job"), written as PEM files in a temp
// directory.
type PKI struct {
	// CAFile is the CA's certificate; CertFile and KeyFile the server's
	// pair; ClientCertFile and ClientKeyFile the client's.
	CAFile, CertFile, KeyFile     string
	ClientCertFile, ClientKeyFile string
	// Pool holds the CA; Client is the client's pair, loaded.
	Pool   *x509.CertPool
	Client tls.Certificate
}

// NewPKI makes a PKI valid for an hour either side of now.
func NewPKI(tb testing.TB) *PKI {
	tb.Helper()
	dir := tb.TempDir()
	p := &PKI{Pool: x509.NewCertPool()}
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			tb.Fatal(err)
		}
		return k
	}
	serial := int64(1)
	issue := func(tmpl, parent *x509.Certificate, parentKey, key *ecdsa.PrivateKey) (*x509.Certificate, []byte) {
		serial++
		tmpl.SerialNumber = big.NewInt(serial)
		tmpl.NotBefore = time.Now().Add(-time.Hour)
		tmpl.NotAfter = time.Now().Add(time.Hour)
		if parent == nil {
			parent, parentKey = tmpl, key
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
		if err != nil {
			tb.Fatal(err)
		}
		cert, err := x509.ParseCertificate(der)
		if err != nil {
			tb.Fatal(err)
		}
		return cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	}
	keyPEM := func(k *ecdsa.PrivateKey) []byte {
		der, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			tb.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
	}
	write := func(name string, b []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			tb.Fatal(err)
		}
		return path
	}
	caKey := newKey()
	ca, caPEM := issue(&x509.Certificate{Subject: pkix.Name{CommonName: "quiver test CA"}, IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}, nil, nil, caKey)
	p.Pool.AddCert(ca)
	p.CAFile = write("ca.pem", caPEM)

	srvKey := newKey()
	_, srvPEM := issue(&x509.Certificate{Subject: pkix.Name{CommonName: "127.0.0.1"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, ca, caKey, srvKey)
	p.CertFile, p.KeyFile = write("server.pem", srvPEM), write("server-key.pem", keyPEM(srvKey))

	cliKey := newKey()
	_, cliPEM := issue(&x509.Certificate{Subject: pkix.Name{CommonName: "etl-job"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, ca, caKey, cliKey)
	cliKeyPEM := keyPEM(cliKey)
	p.ClientCertFile, p.ClientKeyFile = write("client.pem", cliPEM), write("client-key.pem", cliKeyPEM)
	pair, err := tls.X509KeyPair(cliPEM, cliKeyPEM)
	if err != nil {
		tb.Fatal(err)
	}
	p.Client = pair
	return p
}
