package catalog

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiverdb/quiver/store"
)

// TestPlanCarriesCSVTypes: the endpoints of a plan of a CSV version pin
// its files and carry its column types (every column, whatever the plan
// projects); Parquet endpoints and an endpoint that pins no files (a
// limited read of more files than a ticket lists) carry none. The tickets
// parse back to the same types.
func TestPlanCarriesCSVTypes(t *testing.T) {
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "none", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
	put := func(keys []string, format string, mode store.Mode) {
		rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, sc, strings.NewReader(`[{"id":1,"f":0.5,"b":true,"none":null}]`))
		if err != nil {
			t.Fatal(err)
		}
		rdr, _ := array.NewRecordReader(sc, []arrow.RecordBatch{rec})
		rec.Release()
		defer rdr.Release()
		if _, err := st.Put(context.Background(), keys, rdr, store.PutOptions{Mode: mode, Format: format}); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		put([]string{"t", "csv"}, "csv", store.ModeAppend)
		put([]string{"t", "pq"}, "", store.ModeAppend)
	}
	all := map[string]string{"id": "int64", "f": "float64", "b": "bool", "none": "string"}
	for _, tc := range []struct {
		name  string
		cmd   string
		files int // endpoint files: 2 per ticket, -1 none pinned
		want  map[string]string
	}{
		{name: "csv", cmd: `{"path":"t/csv"}`, files: 2, want: all},
		{name: "csv projected", cmd: `{"path":"t/csv","columns":["b"]}`, files: 2, want: all},
		{name: "csv limited", cmd: `{"path":"t/csv","limit":2}`, files: 2, want: all},
		{name: "csv limited past a ticket's files", cmd: `{"path":"t/csv","limit":3}`, files: -1},
		{name: "parquet", cmd: `{"path":"t/pq"}`, files: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(st, WithEndpointBytes(1<<30), WithEndpointFiles(2))
			r, err := ParseCommand([]byte(tc.cmd))
			if err != nil {
				t.Fatal(err)
			}
			info, err := c.Plan(context.Background(), r, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, ep := range info.Endpoint {
				tr, err := ParseTicket(ep.Ticket.Ticket)
				if err != nil {
					t.Fatal(err)
				}
				if tc.files < 0 && tr.Files != nil || tc.files > 0 && len(tr.Files) == 0 || !reflect.DeepEqual(tr.CSVTypes, tc.want) {
					t.Fatalf("ticket %s: files %v, csv types %v; want %v", ep.Ticket.Ticket, tr.Files, tr.CSVTypes, tc.want)
				}
				rdr, _, err := c.Open(context.Background(), tr)
				if err != nil {
					t.Fatal(err)
				}
				rdr.Release()
			}
		})
	}
}

// TestCSVTypesOfSchema: a ticket carries the types of a CSV schema only,
// and only while they fit its bound.
func TestCSVTypesOfSchema(t *testing.T) {
	field := func(name string, typ arrow.DataType) arrow.Field {
		return arrow.Field{Name: name, Type: typ, Nullable: true}
	}
	long := make([]arrow.Field, 0, 3000)
	for i := range cap(long) {
		long = append(long, field(strings.Repeat("x", 100)+string(rune('a'+i%26))+strings.Repeat("y", i/26), arrow.BinaryTypes.String))
	}
	for _, tc := range []struct {
		name   string
		fields []arrow.Field
		ok     bool
	}{
		{"csv", []arrow.Field{field("a", arrow.PrimitiveTypes.Int64), field("b", arrow.BinaryTypes.String)}, true},
		{"no columns", nil, false},
		{"a type CSV does not infer", []arrow.Field{field("a", arrow.PrimitiveTypes.Int32)}, false},
		{"a name that is not UTF-8", []arrow.Field{field("a\xff", arrow.PrimitiveTypes.Int64)}, false},
		{"more than fits a ticket", long, false},
	} {
		if got := csvTypes(arrow.NewSchema(tc.fields, nil)); (got != nil) != tc.ok {
			t.Errorf("%s: %v", tc.name, got)
		}
	}
}
