package catalog

import (
	"context"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiverdb/quiver/store"
)

func appendRows(t *testing.T, st *store.Store, keys []string, n int) {
	t.Helper()
	sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewInt64Builder(memory.DefaultAllocator)
	for i := 0; i < n; i++ {
		b.Append(int64(i))
	}
	arr := b.NewArray()
	b.Release()
	rec := array.NewRecordBatch(sc, []arrow.Array{arr}, int64(n))
	arr.Release()
	rdr, err := array.NewRecordReader(sc, []arrow.RecordBatch{rec})
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	if _, err := st.Put(context.Background(), keys, rdr, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestPlanPinsFiles(t *testing.T) {
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{"a", "b"}
	for i := 0; i < 5; i++ {
		appendRows(t, st, keys, 10)
	}
	c := New(st, WithEndpointBytes(1), WithEndpointFiles(2))
	info, err := c.Plan(context.Background(), &Request{Keys: keys, Version: Latest}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if info.TotalRecords != 50 || len(info.Endpoint) != 5 || info.FlightDescriptor.Type != flight.DescriptorPATH {
		t.Fatalf("records %d endpoints %d", info.TotalRecords, len(info.Endpoint))
	}
	for i, ep := range info.Endpoint {
		r, err := ParseTicket(ep.Ticket.Ticket)
		if err != nil {
			t.Fatal(err)
		}
		if r.Version != 0 || len(r.Files) != 1 || r.Files[0] != store.VersionName(0)+"/"+[]string{"0", "1", "2", "3", "4"}[i]+".parquet" {
			t.Fatalf("endpoint %d ticket %s", i, ep.Ticket.Ticket)
		}
	}
	// Large endpoints group files, capped by the file count.
	c = New(st, WithEndpointFiles(2))
	if info, err = c.Plan(context.Background(), &Request{Keys: keys, Version: Latest}, nil); err != nil || len(info.Endpoint) != 3 {
		t.Fatalf("grouped: %d endpoints, %v", len(info.Endpoint), err)
	}
	var n int
	if err := c.List(context.Background(), []string{"a"}, func(*flight.FlightInfo) error { n++; return nil }); err != nil || n != 1 {
		t.Fatalf("List: %d, %v", n, err)
	}
}

func TestPlanFilterAndLimit(t *testing.T) {
	st, err := store.Open(t.TempDir(), store.WithRowGroupRows(10))
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{"a", "f"}
	for i := 0; i < 4; i++ {
		appendRows(t, st, keys, 100) // ids 0..99 in each file
	}
	c := New(st, WithEndpointBytes(1))
	plan := func(cmd string) *flight.FlightInfo {
		t.Helper()
		r, err := ParseCommand([]byte(cmd))
		if err != nil {
			t.Fatal(err)
		}
		info, err := c.Plan(context.Background(), r, nil)
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		return info
	}
	rows := func(info *flight.FlightInfo) int64 {
		t.Helper()
		var n int64
		for _, ep := range info.Endpoint {
			r, err := ParseTicket(ep.Ticket.Ticket)
			if err != nil {
				t.Fatal(err)
			}
			rdr, _, err := c.Open(context.Background(), r)
			if err != nil {
				t.Fatal(err)
			}
			for rdr.Next() {
				n += rdr.RecordBatch().NumRows()
			}
			if err := rdr.Err(); err != nil {
				t.Fatal(err)
			}
			rdr.Release()
		}
		return n
	}
	// Statistics decide "id >= 90" whole for the last row group of each
	// file: the total is exact.
	info := plan(`{"path": "a/f", "filter": {"col": "id", "op": ">=", "value": 90}}`)
	if info.TotalRecords != 40 || len(info.Endpoint) != 4 || rows(info) != 40 {
		t.Fatalf("id >= 90: total %d, %d endpoints", info.TotalRecords, len(info.Endpoint))
	}
	// Not decided by statistics: unknown.
	info = plan(`{"path": "a/f", "filter": {"col": "id", "op": "!=", "value": 5}}`)
	if info.TotalRecords != -1 || rows(info) != 396 {
		t.Fatalf("id != 5: total %d", info.TotalRecords)
	}
	// No row can match: no file, one endpoint streaming the schema.
	info = plan(`{"path": "a/f", "filter": {"col": "id", "op": ">", "value": 1000}}`)
	if info.TotalRecords != 0 || info.TotalBytes != 0 || len(info.Endpoint) != 1 || rows(info) != 0 {
		t.Fatalf("id > 1000: total %d bytes %d, %d endpoints", info.TotalRecords, info.TotalBytes, len(info.Endpoint))
	}
	// A limit is one endpoint of the files it needs.
	info = plan(`{"path": "a/f", "limit": 150}`)
	if info.TotalRecords != 150 || len(info.Endpoint) != 1 || rows(info) != 150 {
		t.Fatalf("limit 150: total %d, %d endpoints", info.TotalRecords, len(info.Endpoint))
	}
	if r, _ := ParseTicket(info.Endpoint[0].Ticket.Ticket); len(r.Files) != 2 || r.Limit == nil || *r.Limit != 150 {
		t.Fatalf("limit 150 ticket %s", info.Endpoint[0].Ticket.Ticket)
	}
	info = plan(`{"path": "a/f", "limit": 0}`)
	if info.TotalRecords != 0 || len(info.Endpoint) != 1 || rows(info) != 0 {
		t.Fatalf("limit 0: total %d, %d endpoints", info.TotalRecords, len(info.Endpoint))
	}
	info = plan(`{"path": "a/f", "limit": 5, "filter": {"col": "id", "op": "in", "value": [3, 97]}}`)
	if info.TotalRecords != -1 || len(info.Endpoint) != 1 || rows(info) != 5 {
		t.Fatalf("limit 5 in: total %d, %d endpoints", info.TotalRecords, len(info.Endpoint))
	}
	// Bad filters are request errors naming what is wrong.
	for cmd, want := range map[string]string{
		`{"path": "a/f", "filter": {"col": "nope", "op": "=", "value": 1}}`: `"nope": no such column`,
		`{"path": "a/f", "filter": {"col": "id", "op": "=", "value": "x"}}`: `"id"`,
		`{"path": "a/f", "filter": {"col": "id", "op": "~", "value": 1}}`:   `op "~"`,
		`{"path": "a/f", "filter": "id = 1"}`:                               "must be a JSON object",
		`{"path": "a/f", "filter": {"substrait": "!!"}}`:                    "base64",
		`{"path": "a/f", "limit": -1}`:                                      "limit -1",
		`{"path": "a/f", "limit": 1.5}`:                                     "limit 1.5",
		`{"path": "a/f", "limit": "5"}`:                                     `limit "5"`,
		`{"path": "a/f", "version": -1}`:                                    "descriptor: invalid argument: version -1",
	} {
		r, err := ParseCommand([]byte(cmd))
		if err == nil {
			_, err = c.Plan(context.Background(), r, nil)
		}
		if !isRequestError(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want a request error mentioning %s", cmd, err, want)
		}
	}
	// A valid JSON ticket with a bad version is not called invalid JSON
	// (red team round 28).
	if _, err := ParseTicket([]byte(`{"keys": ["a"], "version": -1}`)); err == nil || strings.Contains(err.Error(), "not valid JSON") || !strings.Contains(err.Error(), "version -1") {
		t.Errorf("ticket with version -1: %v", err)
	}
	if r, err := ParseCommand([]byte(`{"path": "a/f", "filter": {"col": "id", "op": "=", "value": 1}}`)); err != nil || r.CheckPut() == nil {
		t.Errorf("a put's descriptor with a filter: %v", err)
	}
}

// TestLimitedPlanOfManyFiles: a limited read of more files than a ticket
// may list pins the version and carries its filter and partition, instead
// of a ticket naming every file; the limit still holds.
func TestLimitedPlanOfManyFiles(t *testing.T) {
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{"a", "many"}
	for i := 0; i < 5; i++ {
		appendRows(t, st, keys, 10)
	}
	c := New(st, WithEndpointFiles(2))
	r, err := ParseCommand([]byte(`{"path": "a/many", "limit": 23}`))
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Plan(context.Background(), r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Endpoint) != 1 {
		t.Fatalf("%d endpoints, want 1", len(info.Endpoint))
	}
	tr, err := ParseTicket(info.Endpoint[0].Ticket.Ticket)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Files != nil || tr.Limit == nil || *tr.Limit != 23 || tr.Version < 0 {
		t.Fatalf("ticket files %v, limit %v, version %d", tr.Files, tr.Limit, tr.Version)
	}
	rdr, _, err := c.Open(context.Background(), tr)
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	var n int64
	for rdr.Next() {
		n += rdr.RecordBatch().NumRows()
	}
	if rdr.Err() != nil || n != 23 {
		t.Fatalf("read %d rows (%v), want 23", n, rdr.Err())
	}
}
