package integration

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"golang.org/x/crypto/bcrypt"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/quiverdb/quiver/internal/quivertest"
)

// proc is a `quiver serve` started with its own flags (TLS, auth, metrics)
// and no client: the tests dial it themselves.
type proc struct {
	*quivertest.Proc
	addr, metricsAddr string
}

// startProc runs quiver serve with args on a fresh data dir and waits for
// its "serving" line; it gets SIGTERM at cleanup and must exit 0.
func startProc(t *testing.T, args ...string) *proc {
	t.Helper()
	p := quivertest.MustStart(t, binary, quivertest.Local(t.TempDir()), args...)
	return &proc{Proc: p, addr: p.Addr, metricsAddr: p.MetricsAddr}
}

func dial(t *testing.T, addr string, creds credentials.TransportCredentials) flight.Client {
	t.Helper()
	c, err := flight.NewClientWithMiddleware(addr, nil, nil, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func withToken(ctx context.Context, tok string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
}

func sha(tok string) string {
	h := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(h[:])
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	// temp then rename: the server may be reading it on SIGHUP
	if err := os.WriteFile(path+".tmp", b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

// TestSecurityRefusesUnauthenticatedExposure: without --auth-file a
// non-loopback address is refused before it is bound.
func TestSecurityRefusesUnauthenticatedExposure(t *testing.T) {
	out, err := exec.Command(binary, "serve", "--addr", "0.0.0.0:0", "--data-dir", t.TempDir()).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || !strings.Contains(string(out), "refusing to serve") || !strings.Contains(string(out), "--insecure-no-auth") {
		t.Fatalf("serve on 0.0.0.0 without auth: %v\n%s", err, out)
	}
}

// TestSecurityAuth: tokens, the basic-auth handshake, roles, the writer in
// the commit record, and a SIGHUP reload that removes a user: missing,
// wrong, expired, garbage and revoked credentials are Unauthenticated and
// write nothing.
func TestSecurityAuth(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("pw-alice"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	tokens := []map[string]any{
		{"sha256": sha("root-token"), "identity": "root", "role": "admin"},
		{"sha256": sha("reader-token"), "identity": "reader", "role": "read", "prefixes": []string{"sales"}},
		{"sha256": sha("old-token"), "identity": "old", "role": "admin", "expires": past},
	}
	authFile := filepath.Join(t.TempDir(), "auth.json")
	writeJSON(t, authFile, map[string]any{
		"users":  []map[string]any{{"name": "alice", "password_bcrypt": string(hash), "role": "write", "prefixes": []string{"sales"}}},
		"tokens": tokens,
	})
	p := startProc(t, "--auth-file", authFile)
	c := dial(t, p.addr, insecure.NewCredentials())
	rec := batch(0, 3)
	defer rec.Release()

	alice, err := c.AuthenticateBasicToken(ctxT(t), "alice", "pw-alice")
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	if _, err := put(alice, c, pathDesc("sales", "orders"), rec); err != nil {
		t.Fatalf("put as alice: %v", err)
	}
	if _, err := put(alice, c, pathDesc("hr", "pay"), rec); code(err) != codes.PermissionDenied {
		t.Fatalf("put outside alice's prefixes: %v", err)
	}
	if _, err := put(withToken(ctxT(t), "reader-token"), c, pathDesc("sales", "orders"), rec); code(err) != codes.PermissionDenied {
		t.Fatalf("put by a reader: %v", err)
	}
	if _, err := c.AuthenticateBasicToken(ctxT(t), "alice", "wrong"); code(err) != codes.Unauthenticated {
		t.Fatalf("handshake with a wrong password: %v", err)
	}
	// The commit record names alice.
	lin, err := c.DoAction(withToken(ctxT(t), "reader-token"), &flight.Action{Type: "lineage", Body: []byte(`{"path": "sales/orders"}`)})
	if err != nil {
		t.Fatal(err)
	}
	r, err := lin.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var cr struct{ Writer string }
	if err := json.Unmarshal(r.Body, &cr); err != nil || cr.Writer != "alice" {
		t.Fatalf("commit record writer %q (%v)", cr.Writer, err)
	}

	// Remove alice and reload.
	writeJSON(t, authFile, map[string]any{"tokens": tokens})
	if err := p.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := c.GetSchema(alice, pathDesc("sales", "orders"))
		if code(err) == codes.Unauthenticated {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("alice's session still works after the reload: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	bad := map[string]context.Context{
		"no token":     ctxT(t),
		"wrong token":  withToken(ctxT(t), "not-a-token"),
		"expired":      withToken(ctxT(t), "old-token"),
		"garbage":      metadata.AppendToOutgoingContext(ctxT(t), "authorization", "garbage"),
		"removed user": alice,
	}
	for name, ctx := range bad {
		if _, err := put(ctx, c, pathDesc("sales", "new"), rec); code(err) != codes.Unauthenticated {
			t.Errorf("%s: put: %v", name, err)
		}
		if _, err := get(ctx, c, []byte("sales/orders")); code(err) != codes.Unauthenticated {
			t.Errorf("%s: get: %v", name, err)
		}
	}
	// Nothing was written: root sees only alice's profile with one commit.
	stream, err := c.ListFlights(withToken(ctxT(t), "root-token"), &flight.Criteria{})
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for {
		fi, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, strings.Join(fi.FlightDescriptor.Path, "/"))
		if fi.TotalRecords != 3 {
			t.Errorf("%v: %d rows, want 3", fi.FlightDescriptor.Path, fi.TotalRecords)
		}
	}
	if len(listed) != 1 || listed[0] != "sales/orders" {
		t.Fatalf("profiles after refused puts: %v", listed)
	}

	// The health service answers without a token.
	conn, err := grpc.NewClient(p.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if res, err := healthpb.NewHealthClient(conn).Check(ctxT(t), &healthpb.HealthCheckRequest{}); err != nil || res.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health without a token: %v %v", res, err)
	}
}

// pki is a CA with a server certificate for 127.0.0.1 and a client
// certificate, written as PEM files.
type pki struct {
	caFile, certFile, keyFile string
	pool                      *x509.CertPool
	client                    tls.Certificate
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
	issue := func(tmpl *x509.Certificate, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, key *ecdsa.PrivateKey) (*x509.Certificate, []byte) {
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
	pair, err := tls.X509KeyPair(cliPEM, keyPEM(cliKey))
	if err != nil {
		t.Fatal(err)
	}
	p.client = pair
	return p
}

func (p *pki) creds(withClientCert bool) credentials.TransportCredentials {
	cfg := &tls.Config{RootCAs: p.pool, MinVersion: tls.VersionTLS12}
	if withClientCert {
		cfg.Certificates = []tls.Certificate{p.client}
	}
	return credentials.NewTLS(cfg)
}

// roundTrip puts three rows and reads them back.
func roundTrip(ctx context.Context, c flight.Client, path string) (*putResult, error) {
	rec := batch(0, 3)
	defer rec.Release()
	pr, err := put(ctx, c, pathDesc(path), rec)
	if err != nil {
		return nil, err
	}
	tb, err := get(ctx, c, []byte(path))
	if err != nil {
		return nil, err
	}
	defer tb.release()
	if tb.rows != 3 {
		return nil, errors.New("read " + strconv.FormatInt(tb.rows, 10) + " rows, want 3")
	}
	return pr, nil
}

// TestSecurityTLS: the Go client over TLS; a plaintext client is refused.
func TestSecurityTLS(t *testing.T) {
	k := newPKI(t)
	p := startProc(t, "--tls-cert", k.certFile, "--tls-key", k.keyFile)
	if _, err := roundTrip(ctxT(t), dial(t, p.addr, k.creds(false)), "tls"); err != nil {
		t.Fatalf("TLS round trip: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := dial(t, p.addr, insecure.NewCredentials()).GetSchema(ctx, pathDesc("tls")); code(err) != codes.Unavailable {
		t.Fatalf("plaintext client against TLS: %v", err)
	}
}

// TestSecurityMTLS: under mutual TLS a client with a certificate of the
// CA gets in (the writer names the certificate); one without is refused.
func TestSecurityMTLS(t *testing.T) {
	k := newPKI(t)
	p := startProc(t, "--tls-cert", k.certFile, "--tls-key", k.keyFile, "--tls-client-ca", k.caFile)
	pr, err := roundTrip(ctxT(t), dial(t, p.addr, k.creds(true)), "mtls")
	if err != nil {
		t.Fatalf("mTLS round trip: %v", err)
	}
	c := dial(t, p.addr, k.creds(true))
	lin, err := c.DoAction(ctxT(t), &flight.Action{Type: "lineage", Body: []byte(`{"path": "mtls"}`)})
	if err != nil {
		t.Fatal(err)
	}
	r, err := lin.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(r.Body), "cert etl-job") {
		t.Errorf("commit record %s (put %+v) does not name the client certificate", r.Body, pr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := roundTrip(ctx, dial(t, p.addr, k.creds(false)), "nocert"); err == nil || code(err) == codes.OK {
		t.Fatalf("client without a certificate got in: %v", err)
	}
}

// TestSecurityMetrics: after one put and one get the scrape shows them.
func TestSecurityMetrics(t *testing.T) {
	p := startProc(t, "--metrics-addr", "127.0.0.1:0")
	if p.metricsAddr == "" {
		t.Fatal("no metrics address printed")
	}
	if _, err := roundTrip(ctxT(t), dial(t, p.addr, insecure.NewCredentials()), "m"); err != nil {
		t.Fatal(err)
	}
	scrape := func(path string) (int, string) {
		res, err := http.Get("http://" + p.metricsAddr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	st, body := scrape("/metrics")
	if st != http.StatusOK {
		t.Fatalf("/metrics: %d", st)
	}
	value := func(series string) float64 {
		t.Helper()
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("no %s in\n%s", series, body)
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		return v
	}
	for series, want := range map[string]float64{
		`quiver_rpc_requests_total{code="OK",method="DoPut"}`:         1,
		`quiver_rpc_requests_total{code="OK",method="DoGet"}`:         1,
		`quiver_rpc_duration_seconds_count{code="OK",method="DoPut"}`: 1,
		`quiver_rows_total{direction="in"}`:                           3,
		`quiver_rows_total{direction="out"}`:                          3,
		`quiver_commits_total{kind="write"}`:                          1, // the first put to a new profile makes v0
		`quiver_open_streams{method="DoGet"}`:                         0,
		// the write took the manifest lock once, without waiting long
		`quiver_lock_wait_seconds_count{outcome="acquired"}`: 1,
	} {
		if got := value(series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	if in, out := value(`quiver_bytes_total{direction="in"}`), value(`quiver_bytes_total{direction="out"}`); in <= 0 || out <= 0 {
		t.Errorf("bytes in %v out %v", in, out)
	}
	if st, body := scrape("/healthz"); st != http.StatusOK || !strings.Contains(body, "ok") {
		t.Errorf("/healthz: %d %q", st, body)
	}
}
