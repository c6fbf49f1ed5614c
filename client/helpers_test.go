package client_test

import (
	"context"
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

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiverdb/quiver/client"
	"github.com/quiverdb/quiver/flightserver"
	"github.com/quiverdb/quiver/internal/quivertest"
	"github.com/quiverdb/quiver/store"
)

// server is an in-process Quiver server on a loopback port over a temp
// store, with a checked allocator that must be back to zero at the end.
type server struct {
	addr string
	st   *store.Store
}

func startServer(t *testing.T, opts ...flightserver.Option) *server {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	st, err := store.Open(t.TempDir(), store.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.AssertSize(t, 0) }) // after the stop below
	srv := flightserver.New(st, append([]flightserver.Option{flightserver.WithAllocator(mem)}, opts...)...)
	return &server{addr: quivertest.ServeInProcess(t, srv), st: st}
}

// connect returns a client of s with a checked allocator, closed and
// checked at the end of the test.
func connect(t *testing.T, addr string, opts ...client.Option) *client.Client {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	c, err := client.Connect(context.Background(), addr, append([]client.Option{client.WithAllocator(mem)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		mem.AssertSize(t, 0)
	})
	return c
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var testSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "region", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

// batch makes n rows with ids from start; region is regions[i%len].
func batch(start, n int64, regions ...string) arrow.RecordBatch {
	if len(regions) == 0 {
		regions = []string{"eu"}
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, testSchema)
	defer b.Release()
	for i := int64(0); i < n; i++ {
		b.Field(0).(*array.Int64Builder).Append(start + i)
		b.Field(1).(*array.StringBuilder).Append(regions[int(i)%len(regions)])
	}
	return b.NewRecordBatch()
}

// reader returns a reader of the batches, which it releases.
func reader(t *testing.T, recs ...arrow.RecordBatch) array.RecordReader {
	t.Helper()
	rdr, err := array.NewRecordReader(testSchema, recs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		r.Release()
	}
	t.Cleanup(rdr.Release)
	return rdr
}

// ids drains rdr and returns its id column; it releases rdr.
func ids(t *testing.T, rdr array.RecordReader) []int64 {
	t.Helper()
	defer rdr.Release()
	var out []int64
	for rdr.Next() {
		col := rdr.RecordBatch().Column(0).(*array.Int64)
		out = append(out, col.Int64Values()...)
	}
	if err := rdr.Err(); err != nil {
		t.Fatalf("read: %v", err)
	}
	return out
}

func seq(from, n int64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = from + int64(i)
	}
	return out
}

// pki is a CA with a server certificate for 127.0.0.1 and a client
// certificate, written as PEM files.
type pki struct {
	caFile, certFile, keyFile string // the CA; the server's pair
	cliCert, cliKey           string // the client's pair
	pool                      *x509.CertPool
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	dir := t.TempDir()
	p := &pki{pool: x509.NewCertPool()}
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
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
			t.Fatal(err)
		}
		cert, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		return cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	}
	keyPEM := func(k *ecdsa.PrivateKey) []byte {
		der, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
	}
	write := func(name string, b []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	caKey := newKey()
	ca, caPEM := issue(&x509.Certificate{Subject: pkix.Name{CommonName: "quiver test CA"}, IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}, nil, nil, caKey)
	p.pool.AddCert(ca)
	p.caFile = write("ca.pem", caPEM)

	srvKey := newKey()
	_, srvPEM := issue(&x509.Certificate{Subject: pkix.Name{CommonName: "127.0.0.1"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, ca, caKey, srvKey)
	p.certFile, p.keyFile = write("server.pem", srvPEM), write("server-key.pem", keyPEM(srvKey))

	cliKey := newKey()
	_, cliPEM := issue(&x509.Certificate{Subject: pkix.Name{CommonName: "etl-job"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, ca, caKey, cliKey)
	p.cliCert, p.cliKey = write("client.pem", cliPEM), write("client-key.pem", keyPEM(cliKey))
	return p
}

// serverTLS is the server side of p; mutual asks for client certificates.
func (p *pki) serverTLS(t *testing.T, mutual bool) flightserver.Option {
	t.Helper()
	files := flightserver.TLSFiles{CertFile: p.certFile, KeyFile: p.keyFile}
	if mutual {
		files.ClientCAFile = p.caFile
	}
	cfg, _, err := flightserver.LoadTLS(files)
	if err != nil {
		t.Fatal(err)
	}
	return flightserver.WithTLS(cfg)
}

func (p *pki) clientPair(t *testing.T) tls.Certificate {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(p.cliCert, p.cliKey)
	if err != nil {
		t.Fatal(err)
	}
	return pair
}
