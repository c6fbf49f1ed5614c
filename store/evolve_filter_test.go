package store

import (
	"context"
	"errors"
	"testing"
)

// TestFilterOverEvolvedVersion: filters on a column that older files of
// the version lack (they read as null there: statistics must not prune
// them for is_null, nor fail on the missing column), on an old column, and
// with a projection that leaves the filter column out.
func TestFilterOverEvolvedVersion(t *testing.T) {
	s, _ := newTestStore(t)
	keys := []string{"evo", "f"}
	put(t, s, ModeWrite, keys, fromJSON(t, evoSchema(fID, fName), `[{"id":1,"name":"a"},{"id":2,"name":"b"}]`), PutOptions{SchemaVersion: "1.0.0"})
	put(t, s, ModeAppend, keys, fromJSON(t, evoSchema(fID, fName, fX), `[{"id":3,"name":"c","x":1.5},{"id":4,"name":"d","x":null}]`), PutOptions{SchemaVersion: "1.1.0"})
	put(t, s, ModeAppend, keys, fromJSON(t, evoSchema(fID, fName, fX), `[{"id":5,"name":"e","x":9}]`), PutOptions{})
	for _, c := range []struct {
		where   string
		columns []string
		want    string
	}{
		{"x > 1", nil, "3,5"},
		{"x = 1.5", []string{"id"}, "3"},
		{"x is null", nil, "1,2,4"},
		{"x is not null", []string{"id", "name"}, "3,5"},
		{"id >= 2 and x is null", nil, "2,4"},
		{"name = 'a' or x > 5", []string{"id"}, "1,5"},
		{"not (x < 2)", nil, "5"},
	} {
		got := sortIDs(filteredIDs(t, s, keys, ReadOptions{SnapshotOptions: SnapshotOptions{Version: Latest, Filter: mustWhere(t, c.where)}, Columns: c.columns}))
		if got != c.want {
			t.Errorf("where %s (columns %v): ids %s, want %s", c.where, c.columns, got, c.want)
		}
	}
}

// TestPanicInReadAheadFailsTheRead: a panic in a file's decoder (a
// goroutine of the read ahead, which no RPC interceptor covers) fails the
// read with a PanicError instead of ending the process.
func TestPanicInReadAheadFailsTheRead(t *testing.T) {
	s, _ := newTestStore(t)
	keys := []string{"rp"}
	put(t, s, ModeWrite, keys, fromJSON(t, evoSchema(fID), `[{"id":1}]`), PutOptions{})
	testHookProduce = func(DataFile) { panic("boom") }
	defer func() { testHookProduce = nil }()
	rdr, err := s.Read(context.Background(), keys, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	for rdr.Next() {
	}
	var pe *PanicError
	if !errors.As(rdr.Err(), &pe) || pe.Value != "boom" || len(pe.Stack) == 0 {
		t.Fatalf("read error %v, want a PanicError with its stack", rdr.Err())
	}
}
