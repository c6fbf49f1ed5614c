package integration

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/quiverdb/quiver/catalog"
	"github.com/quiverdb/quiver/client"
)

func TestRoundTrip(t *testing.T) {
	s := startServer(t)
	c, fc := s.client, s.flight
	b1, b2, b3 := batch(0, 3), batch(3, 2), batch(100, 4)
	defer b1.Release()
	defer b2.Release()
	defer b3.Release()

	// Raw puts where the descriptor's form is what is tested: PATH, and a
	// CMD naming keys rather than a path (the Go client sends neither).
	pr := mustRawPut(t, fc, pathDesc("sales", "orders"), b1)
	if pr.Path != "sales/orders" || pr.Version != "v0" || pr.Index != 0 || pr.Rows != 3 || len(pr.Files) != 1 ||
		pr.Files[0].Path != "v0/0.parquet" || len(pr.Files[0].SHA256) != 64 {
		t.Fatalf("first put: %+v", pr)
	}
	pr = mustPut(t, c, "sales/orders", client.PutOptions{Metadata: map[string]any{"run": "r7"}}, b2)
	if pr.Version != "v0" || pr.Index != 1 || pr.Rows != 2 || !bytes.Contains(pr.Metadata, []byte("r7")) {
		t.Fatalf("append: %+v", pr)
	}
	pr = mustRawPut(t, fc, cmdDesc(map[string]any{"keys": []string{"sales", "orders"}, "mode": "write", "schema_version": "1.2.0"}), b3)
	if pr.Version != "v1" || pr.Index != 0 || pr.SchemaVersion != "1.2.0" {
		t.Fatalf("write: %+v", pr)
	}

	latest := mustGet(t, c, "sales/orders")
	if got := ints(t, latest, "id"); !slices.Equal(got, []int64{100, 101, 102, 103}) {
		t.Fatalf("latest ids %v", got)
	}
	if !latest.schema.Equal(testSchema) || !slices.Equal(latest.schema.Metadata().Keys(), []string{"owner"}) {
		t.Fatalf("DoGet schema %s, want %s", latest.schema, testSchema)
	}
	if md := latest.schema.Field(0).Metadata; md.FindKey("doc") < 0 {
		t.Fatalf("field metadata lost: %s", latest.schema)
	}
	v0 := mustGet(t, c, `{"path": "sales/orders", "version": "v0"}`)
	if got := ints(t, v0, "id"); !slices.Equal(got, []int64{0, 1, 2, 3, 4}) {
		t.Fatalf("v0 ids %v", got)
	}

	// GetSchema and GetFlightInfo return the schema DoGet streams. Raw:
	// a PATH descriptor, and a version given as a number.
	ctx := ctxT(t)
	sr, err := fc.GetSchema(ctx, pathDesc("sales", "orders"))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := flight.DeserializeSchema(sr.Schema, memory.DefaultAllocator)
	if err != nil || !sc.Equal(latest.schema) || !sc.Metadata().Equal(latest.schema.Metadata()) {
		t.Fatalf("GetSchema %s (%v), DoGet %s", sc, err, latest.schema)
	}
	fi, err := fc.GetFlightInfo(ctx, cmdDesc(map[string]any{"path": "sales/orders", "version": 0}))
	if err != nil {
		t.Fatal(err)
	}
	if fi.TotalRecords != 5 || fi.TotalBytes <= 0 || !fi.Ordered || len(fi.Endpoint) != 1 {
		t.Fatalf("flight info: records %d bytes %d ordered %v endpoints %d", fi.TotalRecords, fi.TotalBytes, fi.Ordered, len(fi.Endpoint))
	}
	fsc, _ := flight.DeserializeSchema(fi.Schema, memory.DefaultAllocator)
	if !fsc.Equal(latest.schema) {
		t.Fatalf("FlightInfo schema %s", fsc)
	}
	ep := mustGet(t, c, string(fi.Endpoint[0].Ticket.Ticket))
	if ep.rows != 5 {
		t.Fatalf("endpoint rows %d", ep.rows)
	}
	// A bare path in a CMD descriptor works too.
	if _, err := fc.GetSchema(ctx, &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: []byte("sales/orders")}); err != nil {
		t.Fatal(err)
	}
}

func listFlights(t *testing.T, c *client.Client, prefix string) []string {
	t.Helper()
	profiles, err := c.List(ctxT(t), prefix)
	if err != nil {
		t.Fatalf("ListFlights %q: %v", prefix, err)
	}
	var out []string
	for _, p := range profiles {
		fi := p.Info
		if fi.FlightDescriptor.Type != flight.DescriptorPATH || len(fi.Endpoint) == 0 || fi.TotalRecords < 0 || !fi.Ordered {
			t.Fatalf("ListFlights info: %v", fi)
		}
		out = append(out, p.Path)
	}
	return out
}

func TestListFlights(t *testing.T) {
	s := startServer(t)
	b := batch(0, 2)
	defer b.Release()
	for _, p := range []string{"sales/orders", "sales/returns", "salesman/x", "ops/a/b"} {
		mustPut(t, s.client, p, client.PutOptions{}, b)
	}
	for prefix, want := range map[string][]string{
		"":             {"ops/a/b", "sales/orders", "sales/returns", "salesman/x"},
		"sales":        {"sales/orders", "sales/returns"},
		"sales/orders": {"sales/orders"},
		"ops":          {"ops/a/b"},
		"nothing":      nil,
	} {
		if got := listFlights(t, s.client, prefix); !slices.Equal(got, want) {
			t.Errorf("ListFlights(%q) = %v, want %v", prefix, got, want)
		}
	}
}

// action runs one action and returns the bodies of its results, each as
// the server sent it; a nil body is sent as no body.
func action(c *client.Client, t *testing.T, typ string, body any) ([][]byte, error) {
	t.Helper()
	if body == nil {
		body = []byte(nil)
	}
	var out [][]byte
	err := c.DoAction(ctxT(t), typ, body, func(b []byte) error {
		out = append(out, b)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func mustAction(t *testing.T, c *client.Client, typ string, body any, v any) [][]byte {
	t.Helper()
	out, err := action(c, t, typ, body)
	if err != nil {
		t.Fatalf("%s: %v", typ, err)
	}
	if v != nil {
		if len(out) != 1 {
			t.Fatalf("%s: %d results", typ, len(out))
		}
		if err := json.Unmarshal(out[0], v); err != nil {
			t.Fatalf("%s: %s: %v", typ, out[0], err)
		}
	}
	return out
}

func TestActions(t *testing.T) {
	s := startServer(t)
	c := s.client
	b := batch(0, 10)
	defer b.Release()
	mustPut(t, c, "a/p", client.PutOptions{}, b)
	mustPut(t, c, "a/p", client.PutOptions{}, b)
	mustPut(t, c, "a/p", client.PutOptions{Mode: catalog.ModeWrite}, b)

	// Raw: the client does not list actions.
	stream, err := c.Flight().ListActions(ctxT(t), &flight.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for {
		a, err := stream.Recv()
		if err != nil {
			break
		}
		names = append(names, a.Type)
	}
	if want := []string{"list-versions", "verify", "lineage", "remove-old-versions", "sweep", "break-lock", "compact", "set-schema-policy"}; !slices.Equal(names, want) {
		t.Fatalf("ListActions %v", names)
	}

	var lv struct {
		Path     string `json:"path"`
		Latest   string `json:"latest"`
		Versions []struct {
			Version string `json:"version"`
			Files   int    `json:"files"`
			Rows    int64  `json:"rows"`
			Bytes   int64  `json:"bytes"`
			Created string `json:"created"`
		} `json:"versions"`
	}
	mustAction(t, c, "list-versions", map[string]any{"path": "a/p"}, &lv)
	if lv.Path != "a/p" || lv.Latest != "v1" || len(lv.Versions) != 2 || lv.Versions[0].Rows != 20 || lv.Versions[0].Files != 2 ||
		lv.Versions[1].Rows != 10 || lv.Versions[0].Created == "" {
		t.Fatalf("list-versions %+v", lv)
	}

	var vr struct {
		OK           bool              `json:"ok"`
		CheckedFiles int               `json:"checked_files"`
		Problems     []json.RawMessage `json:"problems"`
	}
	mustAction(t, c, "verify", nil, &vr)
	if !vr.OK || vr.CheckedFiles != 3 || len(vr.Problems) != 0 {
		t.Fatalf("verify %+v", vr)
	}

	lin := mustAction(t, c, "lineage", map[string]any{"path": "a/p"}, nil)
	if len(lin) != 3 {
		t.Fatalf("lineage: %d records", len(lin))
	}
	var first putResult
	_ = json.Unmarshal(lin[0], &first)
	if first.Version != "v0" || first.Index != 0 {
		t.Fatalf("lineage[0] %s", lin[0])
	}

	var comp putResult
	mustAction(t, c, "compact", map[string]any{"path": "a/p"}, &comp)
	if comp.Version != "v2" || comp.Rows != 10 {
		t.Fatalf("compact %+v", comp)
	}

	var rm struct {
		Removed []string `json:"removed"`
	}
	mustAction(t, c, "remove-old-versions", map[string]any{"path": "a/p", "keep": 1, "grace_s": 0}, &rm)
	if !slices.Equal(rm.Removed, []string{"v0", "v1"}) {
		t.Fatalf("remove-old-versions %+v", rm)
	}
	if got := mustGet(t, c, "a/p"); got.rows != 10 {
		t.Fatalf("after retention: %d rows", got.rows)
	}

	var sw struct {
		Removed []string `json:"removed"`
	}
	mustAction(t, c, "sweep", map[string]any{"older_than_s": 0}, &sw)
	if sw.Removed == nil {
		t.Fatalf("sweep: removed is not a list")
	}

	var bl struct {
		Broken bool   `json:"broken"`
		Reason string `json:"reason"`
	}
	mustAction(t, c, "break-lock", map[string]any{"path": "a/p"}, &bl)
	if bl.Broken || bl.Reason == "" {
		t.Fatalf("break-lock of an unlocked profile: %+v", bl)
	}
}

func TestHealth(t *testing.T) {
	s := startServer(t)
	conn, err := grpc.NewClient(s.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, svc := range []string{"", "arrow.flight.protocol.FlightService"} {
		res, err := healthpb.NewHealthClient(conn).Check(ctxT(t), &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || res.Status != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("health %q: %v %v", svc, res, err)
		}
	}
}

func TestIdempotentPut(t *testing.T) {
	s := startServer(t)
	b := batch(0, 5)
	defer b.Release()
	opts := client.PutOptions{RequestID: "job-42"}
	first := mustPut(t, s.client, "jobs/run", opts, b)
	again := mustPut(t, s.client, "jobs/run", opts, b)
	if again.Version != first.Version || again.Index != first.Index || again.Files[0].SHA256 != first.Files[0].SHA256 {
		t.Fatalf("retry returned %+v, first %+v", again, first)
	}
	if got := mustGet(t, s.client, "jobs/run"); got.rows != 5 {
		t.Fatalf("retried put wrote again: %d rows", got.rows)
	}
	other := mustPut(t, s.client, "jobs/run", client.PutOptions{RequestID: "job-43"}, b)
	if other.Index == first.Index {
		t.Fatalf("a new request id did not append: %+v", other)
	}
}

func TestProjection(t *testing.T) {
	s := startServer(t)
	b := batch(0, 6, "eu", "us")
	defer b.Release()
	mustPut(t, s.client, "p", client.PutOptions{}, b)
	tb := mustGet(t, s.client, `{"path":"p","columns":["val","id"]}`)
	if tb.schema.NumFields() != 2 || tb.schema.Field(0).Name != "val" || tb.schema.Field(1).Name != "id" || tb.rows != 6 {
		t.Fatalf("projection schema %s rows %d", tb.schema, tb.rows)
	}
	plan, err := s.client.Plan(ctxT(t), client.ReadRequest{Path: "p", Columns: []string{"val", "id"}})
	if err != nil {
		t.Fatal(err)
	}
	if sc := plan.Schema; !sc.Equal(tb.schema) {
		t.Fatalf("FlightInfo schema %s, DoGet %s", sc, tb.schema)
	}
	if ep := mustGet(t, s.client, string(plan.Endpoints[0].Ticket.Ticket)); !ep.schema.Equal(tb.schema) || ep.rows != 6 {
		t.Fatalf("endpoint: %s %d", ep.schema, ep.rows)
	}
}

// dataFiles lists the visible data files and commit records under dir,
// relative to it (hidden temps excluded).
func dataFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if !d.IsDir() && (strings.HasSuffix(name, ".parquet") && !strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".commit.json") || name == "manifest.json") {
			rel, _ := filepath.Rel(dir, p)
			b, _ := os.ReadFile(p)
			if name == "manifest.json" {
				rel += "=" + string(b)
			}
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var _ = codes.OK
