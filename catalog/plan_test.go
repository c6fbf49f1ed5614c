package catalog

import (
	"context"
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
