package integration

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/quiverdb/quiver/catalog"
	"github.com/quiverdb/quiver/client"
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

func withToken(ctx context.Context, tok string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
}

func sha(tok string) string { return quivertest.TokenSHA256(tok) }

// firstLineage is the first commit record of a profile, as the server
// sent it.
func firstLineage(ctx context.Context, c *client.Client, path string) ([]byte, error) {
	var first []byte
	err := c.DoAction(ctx, catalog.ActionLineage, catalog.PathBody{Path: path}, func(b []byte) error {
		if first == nil {
			first = b
		}
		return nil
	})
	if err == nil && first == nil {
		err = errors.New("no lineage record")
	}
	return first, err
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
	quivertest.WriteJSON(t, authFile, map[string]any{
		"users":  []map[string]any{{"name": "alice", "password_bcrypt": string(hash), "role": "write", "prefixes": []string{"sales"}}},
		"tokens": tokens,
	})
	p := startProc(t, "--auth-file", authFile)
	c := connect(t, p.addr) // no credentials of its own: a test's context carries them
	rec := batch(0, 3)
	defer rec.Release()

	alice := connect(t, p.addr, client.WithBasicAuth("alice", "pw-alice")) // the handshake
	if _, err := put(ctxT(t), alice, "sales/orders", client.PutOptions{}, rec); err != nil {
		t.Fatalf("put as alice: %v", err)
	}
	if _, err := put(ctxT(t), alice, "hr/pay", client.PutOptions{}, rec); code(err) != codes.PermissionDenied {
		t.Fatalf("put outside alice's prefixes: %v", err)
	}
	if _, err := put(withToken(ctxT(t), "reader-token"), c, "sales/orders", client.PutOptions{}, rec); code(err) != codes.PermissionDenied {
		t.Fatalf("put by a reader: %v", err)
	}
	if _, err := client.Connect(ctxT(t), p.addr, client.WithBasicAuth("alice", "wrong")); code(err) != codes.Unauthenticated {
		t.Fatalf("handshake with a wrong password: %v", err)
	}
	// The commit record names alice.
	r, err := firstLineage(withToken(ctxT(t), "reader-token"), c, "sales/orders")
	if err != nil {
		t.Fatal(err)
	}
	var cr struct{ Writer string }
	if err := json.Unmarshal(r, &cr); err != nil || cr.Writer != "alice" {
		t.Fatalf("commit record writer %q (%v)", cr.Writer, err)
	}

	// Remove alice and reload.
	quivertest.WriteJSON(t, authFile, map[string]any{"tokens": tokens})
	if err := p.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := alice.Schema(ctxT(t), client.ReadRequest{Path: "sales/orders"})
		if code(err) == codes.Unauthenticated {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("alice's session still works after the reload: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	bad := map[string]struct {
		c   *client.Client
		ctx context.Context
	}{
		"no token":     {c, ctxT(t)},
		"wrong token":  {c, withToken(ctxT(t), "not-a-token")},
		"expired":      {c, withToken(ctxT(t), "old-token")},
		"garbage":      {c, metadata.AppendToOutgoingContext(ctxT(t), "authorization", "garbage")},
		"removed user": {alice, ctxT(t)},
	}
	for name, b := range bad {
		if _, err := put(b.ctx, b.c, "sales/new", client.PutOptions{}, rec); code(err) != codes.Unauthenticated {
			t.Errorf("%s: put: %v", name, err)
		}
		if _, err := get(b.ctx, b.c, []byte("sales/orders")); code(err) != codes.Unauthenticated {
			t.Errorf("%s: get: %v", name, err)
		}
	}
	// Nothing was written: root sees only alice's profile with one commit.
	profiles, err := c.List(withToken(ctxT(t), "root-token"), "")
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, fi := range profiles {
		listed = append(listed, fi.Path)
		if fi.TotalRecords != 3 {
			t.Errorf("%v: %d rows, want 3", fi.Keys, fi.TotalRecords)
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

// tlsClient connects to a TLS server of k, with k's client certificate
// when withClientCert.
func tlsClient(t *testing.T, addr string, k *quivertest.PKI, withClientCert bool) *client.Client {
	opts := []client.Option{client.WithCAPool(k.Pool)}
	if withClientCert {
		opts = append(opts, client.WithClientCertificate(k.Client))
	}
	return connect(t, addr, opts...)
}

// roundTrip puts three rows and reads them back.
func roundTrip(ctx context.Context, c *client.Client, path string) (*putResult, error) {
	rec := batch(0, 3)
	defer rec.Release()
	pr, err := put(ctx, c, path, client.PutOptions{}, rec)
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
	k := quivertest.NewPKI(t)
	p := startProc(t, "--tls-cert", k.CertFile, "--tls-key", k.KeyFile)
	if _, err := roundTrip(ctxT(t), tlsClient(t, p.addr, k, false), "tls"); err != nil {
		t.Fatalf("TLS round trip: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := connect(t, p.addr).Schema(ctx, client.ReadRequest{Path: "tls"}); code(err) != codes.Unavailable {
		t.Fatalf("plaintext client against TLS: %v", err)
	}
}

// TestSecurityMTLS: under mutual TLS a client with a certificate of the
// CA gets in (the writer names the certificate); one without is refused.
func TestSecurityMTLS(t *testing.T) {
	k := quivertest.NewPKI(t)
	p := startProc(t, "--tls-cert", k.CertFile, "--tls-key", k.KeyFile, "--tls-client-ca", k.CAFile)
	pr, err := roundTrip(ctxT(t), tlsClient(t, p.addr, k, true), "mtls")
	if err != nil {
		t.Fatalf("mTLS round trip: %v", err)
	}
	r, err := firstLineage(ctxT(t), tlsClient(t, p.addr, k, true), "mtls")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(r), "cert etl-job") {
		t.Errorf("commit record %s (put %+v) does not name the client certificate", r, pr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := roundTrip(ctx, tlsClient(t, p.addr, k, false), "nocert"); err == nil || code(err) == codes.OK {
		t.Fatalf("client without a certificate got in: %v", err)
	}
}

// TestSecurityMetrics: after one put and one get the scrape shows them.
func TestSecurityMetrics(t *testing.T) {
	p := startProc(t, "--metrics-addr", "127.0.0.1:0")
	if p.metricsAddr == "" {
		t.Fatal("no metrics address printed")
	}
	if _, err := roundTrip(ctxT(t), connect(t, p.addr), "m"); err != nil {
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
