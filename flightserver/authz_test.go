package flightserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/rs/zerolog"
	"golang.org/x/crypto/bcrypt"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/quiverdb/quiver/catalog"
	"github.com/quiverdb/quiver/internal/quivertest"
	"github.com/quiverdb/quiver/store"
	"github.com/quiverdb/quiver/store/maint"
)

// testAuth is an auth file with one static token per role, each limited
// to the prefix "sales" or not limited, a root token, and a user.
func testAuth(t *testing.T) *AuthFile {
	t.Helper()
	f := &AuthFile{}
	for _, role := range []string{"read", "write", "admin"} {
		f.Tokens = append(f.Tokens,
			AuthToken{SHA256: TokenSHA256("tok-" + role + "-sales"), Identity: role + "-sales", Role: role, Prefixes: []string{"sales"}},
			AuthToken{SHA256: TokenSHA256("tok-" + role + "-all"), Identity: role + "-all", Role: role})
	}
	past := time.Now().Add(-time.Minute)
	f.Tokens = append(f.Tokens, AuthToken{SHA256: TokenSHA256("tok-expired"), Identity: "old", Role: "admin", Expires: &past})
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	f.Users = []AuthUser{{Name: "alice", PasswordBcrypt: string(hash), Role: "write", Prefixes: []string{"sales/orders"}}}
	return f
}

type authServer struct {
	c    flight.Client
	srv  *Server
	st   *store.Store
	a    *Authenticator
	mem  *memory.CheckedAllocator
	addr string
}

// startAuth runs a Server with auth on a loopback port.
func startAuth(t *testing.T, f *AuthFile, opts ...Option) *authServer {
	t.Helper()
	a, err := NewAuthenticator(f, WithSessionTTL(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	st, err := store.Open(t.TempDir(), store.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { assertFreed(t, mem) }) // after the stop below
	srv := New(st, append([]Option{WithAllocator(mem), WithAuth(a)}, opts...)...)
	addr := quivertest.ServeInProcess(t, srv)
	c := quivertest.MustDial(t, addr, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(4<<20)))
	return &authServer{c: c, srv: srv, st: st, a: a, mem: mem, addr: addr}
}

func bearer(tok string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+tok)
}

// putErr sends rec as one DoPut with a PATH descriptor and returns the
// stream's error.
func putErr(ctx context.Context, c flight.Client, keys []string, rec arrow.RecordBatch) error {
	_, err := quivertest.Put(ctx, c, quivertest.PathDesc(keys...), rec.Schema(), rec)
	return err
}

func getErr(ctx context.Context, c flight.Client, ticket string) error {
	stream, err := c.DoGet(ctx, &flight.Ticket{Ticket: []byte(ticket)})
	if err != nil {
		return err
	}
	for {
		if _, err := stream.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

func actionResults(ctx context.Context, c flight.Client, typ string, body any) ([][]byte, error) {
	return quivertest.Action(ctx, c, typ, body)
}

func listPaths(ctx context.Context, c flight.Client, criteria string) ([]string, error) {
	stream, err := c.ListFlights(ctx, &flight.Criteria{Expression: []byte(criteria)})
	if err != nil {
		return nil, err
	}
	var out []string
	for {
		fi, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, strings.Join(fi.FlightDescriptor.Path, "/"))
	}
}

// TestAuthzMatrix enumerates every RPC and action × every role (limited
// to the prefix "sales" or not) × a profile inside and outside "sales":
// each is allowed or PermissionDenied exactly as Required says.
func TestAuthzMatrix(t *testing.T) {
	s := startAuth(t, testAuth(t))
	rec := strBatch(3, 8)
	defer rec.Release()
	in, out := []string{"sales", "orders"}, []string{"hr", "pay"}
	for _, k := range [][]string{in, out} {
		for range 2 { // two appends: something to compact and a second version to remove later
			if err := putErr(bearer("tok-admin-all"), s.c, k, rec); err != nil {
				t.Fatal(err)
			}
		}
	}
	type op struct {
		name string
		// call performs the operation on the profile keys; ListFlights
		// reports PermissionDenied when the profile is not listed.
		call func(ctx context.Context, keys []string) error
	}
	path := func(keys []string) string { return strings.Join(keys, "/") }
	act := func(typ string, body func(keys []string) any) func(context.Context, []string) error {
		return func(ctx context.Context, keys []string) error {
			_, err := actionResults(ctx, s.c, typ, body(keys))
			return err
		}
	}
	ops := []op{
		{"DoGet", func(ctx context.Context, k []string) error { return getErr(ctx, s.c, path(k)) }},
		{"GetFlightInfo", func(ctx context.Context, k []string) error {
			_, err := s.c.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: k})
			return err
		}},
		{"GetSchema", func(ctx context.Context, k []string) error {
			_, err := s.c.GetSchema(ctx, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: k})
			return err
		}},
		{"ListFlights", func(ctx context.Context, k []string) error {
			for _, crit := range []string{"", k[0], path(k)} {
				got, err := listPaths(ctx, s.c, crit)
				if err != nil {
					return err
				}
				if !slices.Contains(got, path(k)) {
					return status.Error(codes.PermissionDenied, "not listed")
				}
			}
			return nil
		}},
		{"DoPut", func(ctx context.Context, k []string) error { return putErr(ctx, s.c, k, rec) }},
		{catalog.ActionListVersions, act(catalog.ActionListVersions, func(k []string) any { return map[string]any{"path": path(k)} })},
		{catalog.ActionLineage, act(catalog.ActionLineage, func(k []string) any { return map[string]any{"path": path(k)} })},
		{catalog.ActionVerify, act(catalog.ActionVerify, func(k []string) any { return map[string]any{"path": path(k)} })},
		{catalog.ActionVerify + " prefix", act(catalog.ActionVerify, func(k []string) any { return map[string]any{"prefix": k[0]} })},
		{catalog.ActionRemoveOldVersions, act(catalog.ActionRemoveOldVersions, func(k []string) any { return map[string]any{"path": path(k), "keep": 1} })},
		{catalog.ActionBreakLock, act(catalog.ActionBreakLock, func(k []string) any { return map[string]any{"path": path(k)} })},
		{catalog.ActionCompact, act(catalog.ActionCompact, func(k []string) any { return map[string]any{"path": path(k)} })},
		{catalog.ActionSetSchemaPolicy, act(catalog.ActionSetSchemaPolicy, func(k []string) any { return map[string]any{"path": path(k), "schema_policy": "none"} })},
		// Whole-data-dir operations: the profile plays no part, a
		// prefix-limited identity gets PermissionDenied (sweep) or only its
		// own prefixes (verify {}, ListActions).
		{catalog.ActionSweep, act(catalog.ActionSweep, func([]string) any { return map[string]any{} })},
		{catalog.ActionVerify + " {}", act(catalog.ActionVerify, func([]string) any { return map[string]any{} })},
		{"ListActions", func(ctx context.Context, _ []string) error {
			stream, err := s.c.ListActions(ctx, &flight.Empty{})
			if err != nil {
				return err
			}
			for {
				if _, err := stream.Recv(); err != nil {
					if errors.Is(err, io.EOF) {
						return nil
					}
					return err
				}
			}
		}},
	}
	// Every RPC and action of the service is in the matrix.
	for _, a := range catalog.ActionTypes {
		if !slices.ContainsFunc(ops, func(o op) bool { return o.name == a.Type }) {
			t.Fatalf("action %s missing from the matrix", a.Type)
		}
	}
	for name := range Required {
		if !slices.ContainsFunc(ops, func(o op) bool { return o.name == name }) {
			t.Fatalf("%s missing from the matrix", name)
		}
	}

	for _, role := range []Role{RoleRead, RoleWrite, RoleAdmin} {
		for _, limited := range []bool{true, false} {
			ident := role.String() + "-all"
			if limited {
				ident = role.String() + "-sales"
			}
			for _, o := range ops {
				for _, keys := range [][]string{in, out} {
					opName, _, _ := strings.Cut(o.name, " ")
					wantOK := role >= Required[opName]
					switch {
					case o.name == catalog.ActionSweep:
						wantOK = wantOK && !limited
					case o.name == catalog.ActionVerify+" {}", o.name == "ListActions":
						// allowed to every role, narrowed to the identity's prefixes
					default:
						wantOK = wantOK && (!limited || slices.Equal(keys, in))
					}
					t.Run(fmt.Sprintf("%s/%s/%s", ident, o.name, path(keys)), func(t *testing.T) {
						err := o.call(bearer("tok-"+ident), keys)
						switch {
						case wantOK && err != nil:
							t.Fatalf("want allowed, got %v", err)
						case !wantOK && status.Code(err) != codes.PermissionDenied:
							t.Fatalf("want PermissionDenied, got %v", err)
						}
					})
				}
			}
		}
	}
}

// TestVerifyNarrowed: verify {} by a prefix-limited identity checks only
// its own prefixes; unrestricted, it checks everything.
func TestVerifyNarrowed(t *testing.T) {
	s := startAuth(t, testAuth(t))
	rec := strBatch(3, 8)
	defer rec.Release()
	for _, k := range [][]string{{"sales", "orders"}, {"sales", "returns"}, {"hr", "pay"}} {
		if err := putErr(bearer("tok-admin-all"), s.c, k, rec); err != nil {
			t.Fatal(err)
		}
	}
	check := func(tok string, body any) int {
		t.Helper()
		res, err := actionResults(bearer(tok), s.c, catalog.ActionVerify, body)
		if err != nil || len(res) != 1 {
			t.Fatalf("verify %v: %v", body, err)
		}
		var rep maint.VerifyReport
		if err := json.Unmarshal(res[0], &rep); err != nil || !rep.OK {
			t.Fatalf("verify %s: %v", res[0], err)
		}
		return rep.CheckedFiles
	}
	if n := check("tok-read-all", map[string]any{}); n != 3 {
		t.Fatalf("unrestricted verify {} checked %d files, want 3", n)
	}
	if n := check("tok-read-sales", map[string]any{}); n != 2 {
		t.Fatalf("verify {} limited to sales checked %d files, want 2", n)
	}
	if n := check("tok-read-sales", map[string]any{"prefix": "sales/orders"}); n != 1 {
		t.Fatalf("verify sales/orders checked %d files, want 1", n)
	}
	got, err := listPaths(bearer("tok-read-sales"), s.c, "")
	if err != nil || !slices.Equal(got, []string{"sales/orders", "sales/returns"}) {
		t.Fatalf("ListFlights by read-sales: %v %v", got, err)
	}
	got, err = listPaths(bearer("tok-read-sales"), s.c, "hr")
	if err != nil || len(got) != 0 {
		t.Fatalf("ListFlights hr by read-sales: %v %v", got, err)
	}
}

// TestUnauthenticated: missing, wrong, expired and malformed credentials
// and a session of a user removed by a reload are Unauthenticated, and
// nothing is written.
func TestUnauthenticated(t *testing.T) {
	f := testAuth(t)
	s := startAuth(t, f)
	rec := strBatch(3, 8)
	defer rec.Release()

	sessCtx, err := s.c.AuthenticateBasicToken(context.Background(), "alice", "s3cret")
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	if err := putErr(sessCtx, s.c, []string{"sales", "orders"}, rec); err != nil {
		t.Fatalf("put with session token: %v", err)
	}
	if _, err := s.c.AuthenticateBasicToken(context.Background(), "alice", "wrong"); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("handshake with a wrong password: %v", err)
	}
	if _, err := s.c.AuthenticateBasicToken(context.Background(), "mallory", "s3cret"); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("handshake of an unknown user: %v", err)
	}

	// alice is removed; her session token must stop working at once.
	f2 := *f
	f2.Users = nil
	if err := s.a.Set(&f2); err != nil {
		t.Fatal(err)
	}
	for name, ctx := range map[string]context.Context{
		"no token":      context.Background(),
		"wrong token":   bearer("tok-nope"),
		"garbage token": bearer("%%%not-a-token%%%"),
		"expired token": bearer("tok-expired"),
		"empty bearer":  metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "),
		"garbage":       metadata.AppendToOutgoingContext(context.Background(), "authorization", "garbage-without-scheme"),
		"basic outside handshake": metadata.AppendToOutgoingContext(context.Background(), "authorization",
			"Basic YWxpY2U6czNjcmV0"),
		"removed user's session": sessCtx,
	} {
		t.Run(name, func(t *testing.T) {
			if err := putErr(ctx, s.c, []string{"sales", "new"}, rec); status.Code(err) != codes.Unauthenticated {
				t.Fatalf("DoPut: %v", err)
			}
			if err := getErr(ctx, s.c, "sales/orders"); status.Code(err) != codes.Unauthenticated {
				t.Fatalf("DoGet: %v", err)
			}
			if _, err := s.c.GetSchema(ctx, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"sales", "orders"}}); status.Code(err) != codes.Unauthenticated {
				t.Fatalf("GetSchema: %v", err)
			}
			if _, err := actionResults(ctx, s.c, catalog.ActionSweep, map[string]any{}); status.Code(err) != codes.Unauthenticated {
				t.Fatalf("sweep: %v", err)
			}
		})
	}
	// Nothing was written: only alice's one put exists.
	var n int
	err = s.st.ListProfiles(context.Background(), nil, func(ps store.ProfileSummary) error { n++; return nil })
	if err != nil || n != 1 {
		t.Fatalf("%d profiles (%v), want only sales/orders", n, err)
	}
	// The health service needs no credentials.
	conn, err := grpc.NewClient(s.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if res, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil || res.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health without a token: %v %v", res, err)
	}
}

// TestWriterIdentity: the commit record names who wrote it.
func TestWriterIdentity(t *testing.T) {
	s := startAuth(t, testAuth(t))
	rec := strBatch(3, 8)
	defer rec.Release()
	if err := putErr(bearer("tok-write-sales"), s.c, []string{"sales", "orders"}, rec); err != nil {
		t.Fatal(err)
	}
	ctx, err := s.c.AuthenticateBasicToken(context.Background(), "alice", "s3cret")
	if err != nil {
		t.Fatal(err)
	}
	if err := putErr(ctx, s.c, []string{"sales", "orders"}, rec); err != nil {
		t.Fatal(err)
	}
	// A compaction is recorded under the admin who asked for it.
	if _, err := actionResults(bearer("tok-admin-sales"), s.c, catalog.ActionCompact, map[string]any{"path": "sales/orders"}); err != nil {
		t.Fatal(err)
	}
	res, err := actionResults(bearer("tok-read-all"), s.c, catalog.ActionLineage, map[string]any{"path": "sales/orders"})
	if err != nil || len(res) != 3 {
		t.Fatalf("lineage: %d %v", len(res), err)
	}
	var writers []string
	for _, b := range res {
		var cr store.CommitRecord
		if err := json.Unmarshal(b, &cr); err != nil {
			t.Fatal(err)
		}
		writers = append(writers, cr.Writer)
	}
	if !slices.Equal(writers, []string{"write-sales", "alice", "admin-sales"}) {
		t.Fatalf("writers %v", writers)
	}
}

// TestAnonymousWriter: without auth the writer is anonymous@<peer>.
func TestAnonymousWriter(t *testing.T) {
	c, _ := start(t)
	rec := strBatch(3, 8)
	defer rec.Release()
	cr := doPut(t, c, "p", rec)
	if cr.Writer != "anonymous@127.0.0.1" {
		t.Fatalf("writer %q", cr.Writer)
	}
}

// TestIdleTimeout: a DoPut that sends its schema and then nothing is
// cancelled after the idle timeout and commits nothing.
func TestIdleTimeout(t *testing.T) {
	s := startAuth(t, testAuth(t), WithIdleTimeout(300*time.Millisecond))
	rec := strBatch(3, 8)
	defer rec.Release()
	stream, err := s.c.DoPut(bearer("tok-write-all"))
	if err != nil {
		t.Fatal(err)
	}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(rec.Schema()))
	w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"slow"}})
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	var done atomic.Bool
	go func() {
		time.Sleep(5 * time.Second)
		if !done.Load() {
			_ = stream.CloseSend()
		}
	}()
	start := time.Now()
	_, err = stream.Recv()
	done.Store(true)
	if status.Code(err) != codes.DeadlineExceeded || time.Since(start) > 3*time.Second {
		t.Fatalf("after %s: %v", time.Since(start), err)
	}
	_ = w.Close()
	var n int
	_ = s.st.ListProfiles(context.Background(), nil, func(store.ProfileSummary) error { n++; return nil })
	if n != 0 {
		t.Fatalf("%d profiles after an idle put", n)
	}
	// A normal put is not affected.
	if err := putErr(bearer("tok-write-all"), s.c, []string{"fast"}, rec); err != nil {
		t.Fatal(err)
	}
}

// TestDenialLogged: a denial is logged with the identity.
func TestDenialLogged(t *testing.T) {
	var buf syncBuffer
	s := startAuth(t, testAuth(t), WithLogger(zerolog.New(&buf)))
	rec := strBatch(3, 8)
	defer rec.Release()
	if err := putErr(bearer("tok-read-sales"), s.c, []string{"sales", "x"}, rec); status.Code(err) != codes.PermissionDenied {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.Contains(out, `"message":"permission denied"`) || !strings.Contains(out, `"identity":"read-sales"`) || !strings.Contains(out, `"op":"DoPut"`) {
		t.Fatalf("log:\n%s", out)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestPutAbortContract: a DoPut message with app_metadata and no data
// aborts the put (docs/protocol.md): CANCELLED, and neither the batch
// sent before it nor the profile is committed.
func TestPutAbortContract(t *testing.T) {
	ts := startSrv(t, true)
	rec := strBatch(10, 8)
	defer rec.Release()
	stream, err := ts.c.DoPut(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(rec.Schema()))
	w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"ab", "orted"}})
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	_ = w.WriteMetadata([]byte("client: put aborted"))
	_ = w.Close()
	_ = stream.CloseSend()
	_, err = stream.Recv()
	if status.Code(err) != codes.Canceled || !strings.Contains(err.Error(), "aborted") {
		t.Fatalf("abort: got %v, want Canceled saying the client aborted", err)
	}
	if err := getErr(context.Background(), ts.c, "ab/orted"); status.Code(err) != codes.NotFound {
		t.Fatalf("read after an aborted first put: %v, want NotFound", err)
	}
}
