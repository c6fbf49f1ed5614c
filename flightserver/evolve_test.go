package flightserver

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/quiverdb/quiver/catalog"
)

// evoPut sends rows (JSON) with schema sc under a CMD descriptor and
// returns the put result or the error status.
func evoPut(t *testing.T, c flight.Client, cmd map[string]any, sc *arrow.Schema, rows string) (*catalog.PutResult, error) {
	t.Helper()
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, sc, strings.NewReader(rows))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	b, _ := json.Marshal(cmd)
	stream, err := c.DoPut(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(sc))
	w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: b})
	// A refused put may end the stream before the batch is sent (Write
	// then fails with EOF): the status comes from Recv.
	_ = w.Write(rec)
	_ = w.Close()
	_ = stream.CloseSend()
	res, err := stream.Recv()
	if err != nil {
		return nil, err
	}
	var pr catalog.PutResult
	if err := json.Unmarshal(res.AppMetadata, &pr); err != nil {
		t.Fatal(err)
	}
	return &pr, nil
}

func evoGet(t *testing.T, c flight.Client, ticket string) (*arrow.Schema, string) {
	t.Helper()
	stream, err := c.DoGet(context.Background(), &flight.Ticket{Ticket: []byte(ticket)})
	if err != nil {
		t.Fatal(err)
	}
	rdr, err := flight.NewRecordReader(stream)
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	var rows []json.RawMessage
	for rdr.Next() {
		b, _ := rdr.RecordBatch().MarshalJSON()
		var part []json.RawMessage
		_ = json.Unmarshal(b, &part)
		rows = append(rows, part...)
	}
	if err := rdr.Err(); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(rows)
	return rdr.Schema(), string(b)
}

func evoAction(t *testing.T, c flight.Client, typ string, body any) ([][]byte, error) {
	t.Helper()
	b, _ := json.Marshal(body)
	stream, err := c.DoAction(context.Background(), &flight.Action{Type: typ, Body: b})
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for {
		r, err := stream.Recv()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, r.Body)
	}
}

// TestSchemaEvolutionOverFlight: an additive append through DoPut; DoGet,
// GetSchema and GetFlightInfo serve the union, with projection; the put
// result and lineage carry the record's schema; list-versions counts each
// schema version; set-schema-policy and schema_policy in a descriptor; a
// bad evolution is InvalidArgument.
func TestSchemaEvolutionOverFlight(t *testing.T) {
	c, _ := start(t)
	ctx := context.Background()
	id := arrow.Field{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true}
	note := arrow.Field{Name: "note", Type: arrow.BinaryTypes.String, Nullable: true, Metadata: arrow.NewMetadata([]string{"doc"}, []string{"a note"})}
	v1 := arrow.NewSchema([]arrow.Field{id}, nil)
	v2 := arrow.NewSchema([]arrow.Field{note, id}, nil)

	if _, err := evoPut(t, c, map[string]any{"path": "e/p", "mode": "write", "schema_version": "1.0.0", "schema_policy": "additive"}, v1, `[{"id":1}]`); err != nil {
		t.Fatal(err)
	}
	pr, err := evoPut(t, c, map[string]any{"path": "e/p", "schema_version": "1.1.0"}, v2, `[{"id":2,"note":"n"}]`)
	if err != nil {
		t.Fatal(err)
	}
	if pr.Schema == "" || pr.SchemaVersion != "1.1.0" {
		t.Fatalf("put result: schema %q, version %q", pr.Schema, pr.SchemaVersion)
	}
	_, err = evoPut(t, c, map[string]any{"path": "e/p"}, arrow.NewSchema([]arrow.Field{id, note, {Name: "z", Type: arrow.PrimitiveTypes.Int8, Nullable: true}}, nil), `[{"id":3,"note":"m","z":1}]`)
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "schema_version above") {
		t.Fatalf("evolution without a version: %v", err)
	}

	sc, rows := evoGet(t, c, "e/p")
	if want := `[{"id":1,"note":null},{"id":2,"note":"n"}]`; rows != want {
		t.Errorf("DoGet %s, want %s", rows, want)
	}
	if f, _ := sc.FieldsByName("note"); len(f) != 1 || f[0].Metadata.ToMap()["doc"] != "a note" {
		t.Errorf("DoGet schema %s", sc)
	}
	if _, rows = evoGet(t, c, `{"path":"e/p","columns":["note"]}`); rows != `[{"note":null},{"note":"n"}]` {
		t.Errorf("DoGet note %s", rows)
	}
	gs, err := c.GetSchema(ctx, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"e", "p"}})
	if err != nil {
		t.Fatal(err)
	}
	if s, err := flight.DeserializeSchema(gs.Schema, memory.DefaultAllocator); err != nil || s.NumFields() != 2 || s.Field(1).Name != "note" {
		t.Errorf("GetSchema %v %v", s, err)
	}
	fi, err := c.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: []byte(`{"path":"e/p","columns":["note"]}`)})
	if err != nil {
		t.Fatal(err)
	}
	if s, err := flight.DeserializeSchema(fi.Schema, memory.DefaultAllocator); err != nil || s.NumFields() != 1 || s.Field(0).Name != "note" || fi.TotalRecords != 2 {
		t.Errorf("GetFlightInfo %v %v, %d records", s, err, fi.TotalRecords)
	}

	out, err := evoAction(t, c, catalog.ActionListVersions, map[string]any{"path": "e/p"})
	if err != nil {
		t.Fatal(err)
	}
	var lv catalog.ListVersionsResult
	if err := json.Unmarshal(out[0], &lv); err != nil {
		t.Fatal(err)
	}
	want := []catalog.SchemaVersionCount{{SchemaVersion: "1.0.0", Files: 1, Rows: 1}, {SchemaVersion: "1.1.0", Files: 1, Rows: 1}}
	if lv.SchemaPolicy != "additive" || len(lv.Versions) != 1 || lv.Versions[0].SchemaVersion != "1.1.0" || !equalCounts(lv.Versions[0].SchemaVersions, want) {
		t.Errorf("list-versions %s", out[0])
	}
	out, err = evoAction(t, c, catalog.ActionLineage, map[string]any{"path": "e/p"})
	if err != nil || len(out) != 2 || !strings.Contains(string(out[1]), `"schema":"`) {
		t.Errorf("lineage %q %v", out, err)
	}

	// Under the policy a new version must keep "note".
	_, err = evoPut(t, c, map[string]any{"path": "e/p", "mode": "write", "schema_version": "1.1.0"}, v1, `[{"id":9}]`)
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "schema policy is additive") {
		t.Fatalf("write under the policy: %v", err)
	}
	if _, err = evoAction(t, c, catalog.ActionSetSchemaPolicy, map[string]any{"path": "e/p", "schema_policy": "strict"}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("set-schema-policy strict: %v", err)
	}
	out, err = evoAction(t, c, catalog.ActionSetSchemaPolicy, map[string]any{"path": "e/p", "schema_policy": "none"})
	if err != nil || !strings.Contains(string(out[0]), `"schema_policy":"none"`) {
		t.Fatalf("set-schema-policy none: %q %v", out, err)
	}
	if _, err = evoPut(t, c, map[string]any{"path": "e/p", "mode": "write", "schema_version": "1.1.0"}, v1, `[{"id":9}]`); err != nil {
		t.Fatalf("write without the policy: %v", err)
	}
}

func equalCounts(a, b []catalog.SchemaVersionCount) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
