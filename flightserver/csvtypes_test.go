package flightserver

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/quiverdb/quiver/catalog"
)

// TestCSVPlanEndpointsKeepPlanTypes (red team round 18's s05): a plan of a
// CSV version whose column holds only nulls says the column is a string;
// an append then gives it values of another type. The plan's endpoints,
// pinned to the files of the plan, stream the plan's schema (not the type
// the version's files give now) and their rows; a read of the latest
// version sees the new type. With and without the IPC cache (whose
// entries are keyed by the read's schema).
func TestCSVPlanEndpointsKeepPlanTypes(t *testing.T) {
	for _, cached := range []bool{false, true} {
		for _, tc := range []struct {
			name    string
			columns []string
			vType   arrow.DataType // v's type in the append
			first   string         // rows of the write
			second  string         // rows of the append
			planned string         // what the plan's endpoints stream
			after   arrow.DataType // v's type after the append
		}{
			{name: "int64", vType: arrow.PrimitiveTypes.Int64,
				first: `[{"id":0,"v":null},{"id":1,"v":null}]`, second: `[{"id":2,"v":5}]`,
				planned: `[{"id":0,"v":null},{"id":1,"v":null}]`, after: arrow.PrimitiveTypes.Int64},
			{name: "float64", vType: arrow.PrimitiveTypes.Float64,
				first: `[{"id":0,"v":null}]`, second: `[{"id":1,"v":-1.5}]`,
				planned: `[{"id":0,"v":null}]`, after: arrow.PrimitiveTypes.Float64},
			{name: "bool", vType: arrow.FixedWidthTypes.Boolean,
				first: `[{"id":0,"v":null}]`, second: `[{"id":1,"v":true}]`,
				planned: `[{"id":0,"v":null}]`, after: arrow.FixedWidthTypes.Boolean},
			{name: "projected", columns: []string{"v"}, vType: arrow.PrimitiveTypes.Int64,
				first: `[{"id":0,"v":null}]`, second: `[{"id":1,"v":7}]`,
				planned: `[{"v":null}]`, after: arrow.PrimitiveTypes.Int64},
			{name: "typed", vType: arrow.PrimitiveTypes.Int64,
				first: `[{"id":0,"v":3}]`, second: `[{"id":1,"v":4}]`,
				planned: `[{"id":0,"v":3}]`, after: arrow.PrimitiveTypes.Int64},
		} {
			name := tc.name
			if cached {
				name += "/cached"
			}
			t.Run(name, func(t *testing.T) {
				var c flight.Client
				if cached {
					c = startCached(t, t.TempDir(), t.TempDir(), 4<<20).c
				} else {
					c = startPlain(t, t.TempDir())
				}
				schemaOf := func(v arrow.DataType) *arrow.Schema {
					return arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "v", Type: v, Nullable: true}}, nil)
				}
				if _, err := evoPut(t, c, map[string]any{"path": "csv/s05", "mode": "write", "format": "csv"}, schemaOf(tc.vType), tc.first); err != nil {
					t.Fatal(err)
				}
				cmd, _ := json.Marshal(catalog.ReadCommand{Path: "csv/s05", Columns: tc.columns})
				info, err := c.GetFlightInfo(context.Background(), &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: cmd})
				if err != nil {
					t.Fatal(err)
				}
				planned, err := flight.DeserializeSchema(info.Schema, nil)
				if err != nil {
					t.Fatal(err)
				}
				// A read of the endpoints before the append fills the cache
				// with the plan's types.
				for _, ep := range info.Endpoint {
					if sc, rows := evoGet(t, c, string(ep.Ticket.Ticket)); !sc.Equal(planned) || rows != tc.planned {
						t.Fatalf("before the append: %s %s", sc, rows)
					}
				}
				if _, err := evoPut(t, c, map[string]any{"path": "csv/s05", "format": "csv"}, schemaOf(tc.vType), tc.second); err != nil {
					t.Fatal(err)
				}
				latest, _ := evoGet(t, c, "csv/s05")
				if got := latest.Field(latest.FieldIndices("v")[0]).Type; !arrow.TypeEqual(got, tc.after) {
					t.Fatalf("after the append v reads as %s, want %s", got, tc.after)
				}
				var rows []string
				for _, ep := range info.Endpoint {
					sc, got := evoGet(t, c, string(ep.Ticket.Ticket))
					if !sc.Equal(planned) {
						t.Fatalf("endpoint streams %s; the plan says %s", sc, planned)
					}
					rows = append(rows, got)
				}
				if len(rows) != 1 || rows[0] != tc.planned {
					t.Fatalf("endpoints stream %v, want %s", rows, tc.planned)
				}
				if tkt := string(info.Endpoint[0].Ticket.Ticket); !strings.Contains(tkt, `"csv_types":{"id":"int64","v":"`) {
					t.Fatalf("endpoint ticket %s carries no csv_types", tkt)
				}
			})
		}
	}
}

// TestCSVForgedTicketTypes: a ticket's csv_types come from clients. Types
// CSV inference does not give, names that are not exactly the version's
// columns, and types the pinned files' values do not fit are refused with
// INVALID_ARGUMENT saying what is wrong (and naming no server path); types
// the values fit are read as asked. A ticket without them reads as before.
func TestCSVForgedTicketTypes(t *testing.T) {
	data := t.TempDir()
	c := startPlain(t, data)
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "i", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	if _, err := evoPut(t, c, map[string]any{"path": "csv/forged", "mode": "write", "format": "csv"}, sc,
		`[{"i":1,"f":1.5,"b":true,"s":"x"},{"i":2,"f":null,"b":false,"s":"+5"}]`); err != nil {
		t.Fatal(err)
	}
	if _, err := evoPut(t, c, map[string]any{"path": "parquet/p", "mode": "write"}, sc, `[{"i":1,"f":1.5,"b":true,"s":"x"}]`); err != nil {
		t.Fatal(err)
	}
	ticket := func(path, file, types string) string {
		t := `{"path":"` + path + `","files":["` + file + `"]`
		if types != "" {
			t += `,"csv_types":` + types
		}
		return t + "}"
	}
	const csvFile = "v0/0.csv"
	for _, tc := range []struct {
		name   string
		ticket string
		want   string // a part of the error; empty: the rows read
		rows   string
	}{
		{name: "no types", ticket: ticket("csv/forged", csvFile, ""),
			rows: `[{"b":true,"f":1.5,"i":1,"s":"x"},{"b":false,"f":null,"i":2,"s":"+5"}]`},
		{name: "the version's types", ticket: ticket("csv/forged", csvFile, `{"i":"int64","f":"float64","b":"bool","s":"string"}`),
			rows: `[{"b":true,"f":1.5,"i":1,"s":"x"},{"b":false,"f":null,"i":2,"s":"+5"}]`},
		{name: "wider types the values fit", ticket: ticket("csv/forged", csvFile, `{"i":"float64","f":"string","b":"string","s":"string"}`),
			rows: `[{"b":"true","f":"1.5","i":1,"s":"x"},{"b":"false","f":null,"i":2,"s":"+5"}]`},
		{name: "text as int64", ticket: ticket("csv/forged", csvFile, `{"i":"int64","f":"float64","b":"bool","s":"int64"}`),
			want: `column "s" does not read as int64: its values make it string`},
		{name: "text as float64", ticket: ticket("csv/forged", csvFile, `{"i":"int64","f":"float64","b":"bool","s":"float64"}`),
			want: `column "s" does not read as float64`},
		{name: "float as int64", ticket: ticket("csv/forged", csvFile, `{"i":"int64","f":"int64","b":"bool","s":"string"}`),
			want: `column "f" does not read as int64: its values make it float64`},
		{name: "int as bool", ticket: ticket("csv/forged", csvFile, `{"i":"bool","f":"float64","b":"bool","s":"string"}`),
			want: `column "i" does not read as bool`},
		{name: "bool as int64", ticket: ticket("csv/forged", csvFile, `{"i":"int64","f":"float64","b":"int64","s":"string"}`),
			want: `column "b" does not read as int64`},
		{name: "a type inference does not give", ticket: ticket("csv/forged", csvFile, `{"i":"int32","f":"float64","b":"bool","s":"string"}`),
			want: `column "i" has type "int32" (want "int64", "float64", "bool" or "string")`},
		{name: "arrow's name of string", ticket: ticket("csv/forged", csvFile, `{"i":"int64","f":"float64","b":"bool","s":"utf8"}`),
			want: `column "s" has type "utf8"`},
		{name: "not a string", ticket: ticket("csv/forged", csvFile, `{"i":64,"f":"float64","b":"bool","s":"string"}`),
			want: `column "i": want a type name`},
		{name: "not an object", ticket: ticket("csv/forged", csvFile, `["int64"]`),
			want: `csv_types: want an object`},
		{name: "empty", ticket: ticket("csv/forged", csvFile, `{}`),
			want: `csv_types: names no column`},
		{name: "a column twice", ticket: ticket("csv/forged", csvFile, `{"i":"int64","i":"string","f":"float64","b":"bool","s":"string"}`),
			want: `column "i" given twice`},
		{name: "a column missing", ticket: ticket("csv/forged", csvFile, `{"i":"int64","f":"float64","b":"bool"}`),
			want: `lack columns of the version: ["s"]`},
		{name: "a column too many", ticket: ticket("csv/forged", csvFile, `{"i":"int64","f":"float64","b":"bool","s":"string","t":"string"}`),
			want: `name column "t", which the version does not have`},
		{name: "a column in another case", ticket: ticket("csv/forged", csvFile, `{"I":"int64","f":"float64","b":"bool","s":"string"}`),
			want: `name column "I", which the version does not have`},
		{name: "without files", ticket: `{"path":"csv/forged","csv_types":{"i":"int64","f":"float64","b":"bool","s":"string"}}`,
			want: `"csv_types" go with the "files" of one profile`},
		{name: "a Parquet version", ticket: ticket("parquet/p", "v0/0.parquet", `{"i":"int64","f":"float64","b":"bool","s":"string"}`),
			want: `the version is parquet, not CSV`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, rows, err := getAll(t, c, tc.ticket)
			if tc.want == "" {
				if err != nil || rows != tc.rows {
					t.Fatalf("rows %s (%v), want %s", rows, err, tc.rows)
				}
				return
			}
			st, _ := status.FromError(err)
			if err == nil || st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), tc.want) {
				t.Fatalf("got %v (rows %s), want INVALID_ARGUMENT with %q", err, rows, tc.want)
			}
			if strings.Contains(st.Message(), data) {
				t.Fatalf("the error names a server path: %s", st.Message())
			}
		})
	}
}
