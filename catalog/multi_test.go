package catalog

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiverdb/quiver/store"
)

func putJSON(t *testing.T, st *store.Store, path string, sc *arrow.Schema, rows string) {
	t.Helper()
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, sc, strings.NewReader(rows))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	rdr, _ := array.NewRecordReader(sc, []arrow.RecordBatch{rec})
	defer rdr.Release()
	keys, _ := store.ParseKeys(path)
	if _, err := st.Put(context.Background(), keys, rdr, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
}

// readRequest streams a parsed multi-profile ticket into "profile:id" rows.
func readMulti(t *testing.T, c *Catalog, ticket []byte) (*arrow.Schema, []string) {
	t.Helper()
	r, err := ParseTicket(ticket)
	if err != nil {
		t.Fatalf("%s: %v", ticket, err)
	}
	mr, err := c.OpenMulti(context.Background(), r)
	if err != nil {
		t.Fatalf("%s: %v", ticket, err)
	}
	defer mr.Release()
	var out []string
	for mr.Next() {
		rec := mr.RecordBatch()
		ids := rec.Column(rec.Schema().FieldIndices("id")[0])
		var src arrow.Array
		if idx := rec.Schema().FieldIndices("profile"); len(idx) == 1 {
			src = rec.Column(idx[0])
		}
		for i := 0; i < ids.Len(); i++ {
			s := ids.ValueStr(i)
			if src != nil {
				s = src.ValueStr(i) + ":" + s
			}
			out = append(out, s)
		}
	}
	if err := mr.Err(); err != nil {
		t.Fatalf("%s: %v", ticket, err)
	}
	return mr.Schema(), out
}

func TestMultiProfileRead(t *testing.T) {
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	narrow := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int32}, {Name: "region", Type: arrow.BinaryTypes.String}}, nil)
	wide := arrow.NewSchema([]arrow.Field{{Name: "region", Type: arrow.BinaryTypes.String, Nullable: true}, {Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	putJSON(t, st, "s/a", narrow, `[{"id": 1, "region": "eu"}, {"id": 2, "region": "us"}]`)
	putJSON(t, st, "s/a", narrow, `[{"id": 3, "region": "eu"}]`)
	putJSON(t, st, "s/b", wide, `[{"id": 10, "region": "eu"}, {"id": 11, "region": null}]`)
	putJSON(t, st, "t/c", arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.BinaryTypes.String}, {Name: "region", Type: arrow.BinaryTypes.String}}, nil), `[{"id": "x", "region": "eu"}]`)
	putJSON(t, st, "t/d", arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil), `[{"id": 5}]`)
	c := New(st, WithEndpointBytes(1))

	// A prefix: every profile under it, in order; types unified to the
	// wider, nullable where any is; the source column names each row's.
	sc, rows := readMulti(t, c, []byte(`{"prefix": "s", "source_column": "profile"}`))
	if got := strings.Join(rows, ","); got != "s/a:1,s/a:2,s/a:3,s/b:10,s/b:11" {
		t.Fatalf("rows %s", got)
	}
	if f := sc.Field(0); f.Name != "id" || !arrow.TypeEqual(f.Type, arrow.PrimitiveTypes.Int64) {
		t.Fatalf("unified schema %s", sc)
	}
	if f := sc.Field(1); !f.Nullable || sc.Field(2).Name != "profile" {
		t.Fatalf("unified schema %s", sc)
	}
	// Paths, with a filter, projection and limit.
	_, rows = readMulti(t, c, []byte(`{"paths": ["s/b", "s/a"], "columns": ["id"], "filter": {"col": "region", "op": "=", "value": "eu"}, "limit": 2}`))
	if got := strings.Join(rows, ","); got != "10,1" {
		t.Fatalf("filtered rows %s", got)
	}

	// The plan: one snapshot per profile, endpoints per profile, each
	// streaming the unified schema.
	r, err := ParseCommand([]byte(`{"prefix": "s", "source_column": "profile"}`))
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Plan(context.Background(), r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if info.TotalRecords != 5 || len(info.Endpoint) != 3 {
		t.Fatalf("plan: %d rows, %d endpoints", info.TotalRecords, len(info.Endpoint))
	}
	var all []string
	for _, ep := range info.Endpoint {
		got, rows := readMulti(t, c, ep.Ticket.Ticket)
		if !got.Equal(sc) {
			t.Fatalf("endpoint schema %s, want %s", got, sc)
		}
		all = append(all, rows...)
	}
	if got := strings.Join(all, ","); got != "s/a:1,s/a:2,s/a:3,s/b:10,s/b:11" {
		t.Fatalf("endpoints stream %s", got)
	}
	// Endpoints pin their snapshot: a later append is not in them.
	putJSON(t, st, "s/b", wide, `[{"id": 12, "region": "eu"}]`)
	_, rows = readMulti(t, c, info.Endpoint[2].Ticket.Ticket)
	if got := strings.Join(rows, ","); got != "s/b:10,s/b:11" {
		t.Fatalf("pinned endpoint after an append: %s", got)
	}
	// A limited plan is one endpoint.
	r, _ = ParseCommand([]byte(`{"paths": ["s/a", "s/b"], "limit": 4}`))
	if info, err = c.Plan(context.Background(), r, nil); err != nil || len(info.Endpoint) != 1 || info.TotalRecords != 4 {
		t.Fatalf("limited plan: %v, %v", info, err)
	}
	if _, rows = readMulti(t, c, info.Endpoint[0].Ticket.Ticket); len(rows) != 4 {
		t.Fatalf("limited endpoint: %v", rows)
	}

	// Schemas that do not unify, and other errors.
	for cmd, want := range map[string]string{
		`{"prefix": "t"}`:                                          `t/d lacks ["region"]`,
		`{"paths": ["s/a", "t/d"]}`:                                `t/d lacks ["region"]`,
		`{"paths": ["s/a", "t/c"]}`:                                `"id" is int32 in s/a and utf8 in t/c`,
		`{"prefix": "s", "source_column": "region"}`:               "already",
		`{"prefix": "nothing"}`:                                    "no profile under",
		`{"paths": ["s/a", "s/a"]}`:                                "twice",
		`{"path": "s/a", "paths": ["s/b"]}`:                        "give one",
		`{"prefix": "s", "paths": ["s/b"]}`:                        "give one",
		`{"paths": ["s/a"], "version": 0}`:                         "versions",
		`{"paths": ["s/a"], "versions": [0, 1]}`:                   "1 paths",
		`{"paths": ["s/a"], "read": 1}`:                            "index",
		`{"paths": ["s/a"], "files": ["v0/0.parquet"]}`:            "needs \"read\"",
		`{"source_column": "p"}`:                                   "go with",
		`{"path": "s/a", "read": 0}`:                               `"read" and "source_column" go with "prefix" or "paths" only`,
		`{"prefix": "s", "filter": {"col": "x", "op": "is_null"}}`: `"x": no such column`,
	} {
		r, err := ParseCommand([]byte(cmd))
		if err == nil {
			_, err = c.Plan(context.Background(), r, nil)
		}
		if err == nil || !(isRequestError(err) || errors.Is(err, store.ErrSchemaMismatch) || errors.Is(err, store.ErrNotFound)) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error mentioning %s", cmd, err, want)
		}
	}
}
