package store

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"pgregory.net/rapid"
)

// evoModel is what a profile whose schema evolves by appends must read
// back: every acknowledged row, in commit order, null in the columns its
// append did not have.
type evoModel struct {
	cols  []arrow.Field // the version's columns, first-seen order
	minor int           // schema version 1.<minor>.0
	rows  []map[string]any
	next  int64 // next id
}

func (m *evoModel) sv() string { return fmt.Sprintf("1.%d.0", m.minor) }

// TestEvolutionProperty: random sequences of plain appends (columns in any
// order), additive appends, refused appends, reads with random
// projections, compactions and restarts keep every acknowledged row, with
// nulls exactly where its append lacked a column, and refused appends
// change nothing.
func TestEvolutionProperty(t *testing.T) {
	if f := flag.Lookup("rapid.nofailfile"); f != nil && f.Value.String() == f.DefValue {
		_ = flag.Set("rapid.nofailfile", "true") // the seed replays a failure
	}
	if f := flag.Lookup("rapid.checks"); f != nil && f.Value.String() == f.DefValue {
		// Each check commits a few dozen puts, each synced: keep it short.
		n := "20"
		if testing.Short() {
			n = "8"
		}
		_ = flag.Set("rapid.checks", n)
		defer func() { _ = flag.Set("rapid.checks", f.DefValue) }()
	}
	rapid.Check(t, func(rt *rapid.T) {
		dir := t.TempDir()
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		open := func() *Store {
			s, err := Open(dir, WithAllocator(mem), WithLockTimeout(2e9))
			if err != nil {
				rt.Fatal(err)
			}
			return s
		}
		s := open()
		ctx := context.Background()
		keys := []string{"prop"}
		m := &evoModel{cols: []arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}}

		// batch builds n rows for fields (in that order), recording them in
		// the model when keep.
		batch := func(rt *rapid.T, fields []arrow.Field, n int) (array.RecordReader, []map[string]any) {
			sc := arrow.NewSchema(fields, nil)
			b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
			defer b.Release()
			var rows []map[string]any
			for range n {
				row := map[string]any{}
				for i, f := range fields {
					null := f.Name != "id" && rapid.Bool().Draw(rt, "null")
					switch bb := b.Field(i).(type) {
					case *array.Int64Builder:
						if f.Name == "id" {
							row["id"] = float64(m.next)
							bb.Append(m.next)
							m.next++
						} else if null {
							bb.AppendNull()
						} else {
							v := rapid.Int64Range(-1000, 1000).Draw(rt, "int")
							row[f.Name] = float64(v)
							bb.Append(v)
						}
					case *array.StringBuilder:
						if null {
							bb.AppendNull()
						} else {
							v := rapid.StringMatching(`[a-z]{0,4}`).Draw(rt, "str")
							row[f.Name] = v
							bb.Append(v)
						}
					}
				}
				rows = append(rows, row)
			}
			rec := b.NewRecordBatch()
			defer rec.Release()
			rdr, err := array.NewRecordReader(sc, []arrow.RecordBatch{rec})
			if err != nil {
				rt.Fatal(err)
			}
			return rdr, rows
		}
		perm := func(rt *rapid.T, fields []arrow.Field) []arrow.Field {
			return rapid.Permutation(fields).Draw(rt, "order")
		}
		// check reads the profile with a random projection against the
		// model.
		check := func(rt *rapid.T) {
			var cols []string
			names := make([]string, len(m.cols))
			for i, f := range m.cols {
				names[i] = f.Name
			}
			if rapid.Bool().Draw(rt, "project") {
				cols = rapid.SliceOfNDistinct(rapid.SampledFrom(names), 1, len(names), rapid.ID[string]).Draw(rt, "columns")
			}
			rdr, err := s.Read(ctx, keys, ReadOptions{SnapshotOptions: SnapshotOptions{Version: Latest}, Columns: cols})
			if err != nil {
				rt.Fatal(err)
			}
			defer rdr.Release()
			want := cols
			if want == nil {
				want = names
			}
			if got := fieldNames(rdr.Schema()); !reflect.DeepEqual(got, want) {
				rt.Fatalf("columns %v, want %v", got, want)
			}
			var got []map[string]any
			for rdr.Next() {
				b, _ := rdr.RecordBatch().MarshalJSON()
				var part []map[string]any
				if err := json.Unmarshal(b, &part); err != nil {
					rt.Fatal(err)
				}
				got = append(got, part...)
			}
			if err := rdr.Err(); err != nil {
				rt.Fatal(err)
			}
			if len(got) != len(m.rows) {
				rt.Fatalf("%d rows, want %d", len(got), len(m.rows))
			}
			for i, row := range m.rows {
				for _, c := range want {
					if !reflect.DeepEqual(got[i][c], row[c]) {
						rt.Fatalf("row %d column %q: %v, want %v (row %v)", i, c, got[i][c], row[c], got[i])
					}
				}
			}
		}

		rdr, rows := batch(rt, m.cols, rapid.IntRange(1, 3).Draw(rt, "rows"))
		if _, err := s.Put(ctx, keys, rdr, PutOptions{Mode: ModeWrite, SchemaVersion: m.sv(), SchemaPolicy: PolicyAdditive}); err != nil {
			rt.Fatal(err)
		}
		rdr.Release()
		m.rows = append(m.rows, rows...)

		rt.Repeat(map[string]func(*rapid.T){
			"append": func(rt *rapid.T) {
				rdr, rows := batch(rt, perm(rt, m.cols), rapid.IntRange(0, 4).Draw(rt, "rows"))
				defer rdr.Release()
				sv := rapid.SampledFrom([]string{"", m.sv()}).Draw(rt, "sv")
				if _, err := s.Put(ctx, keys, rdr, PutOptions{SchemaVersion: sv}); err != nil {
					rt.Fatal(err)
				}
				m.rows = append(m.rows, rows...)
			},
			"evolve": func(rt *rapid.T) {
				if len(m.cols) > 6 {
					rt.Skip("wide enough")
				}
				add := rapid.IntRange(1, 2).Draw(rt, "add")
				next := append([]arrow.Field(nil), m.cols...)
				for i := range add {
					dt := rapid.SampledFrom([]arrow.DataType{arrow.PrimitiveTypes.Int64, arrow.BinaryTypes.String}).Draw(rt, "type")
					next = append(next, arrow.Field{Name: fmt.Sprintf("c%d_%d", m.minor+1, i), Type: dt, Nullable: true})
				}
				order := perm(rt, next)
				rdr, rows := batch(rt, order, rapid.IntRange(1, 3).Draw(rt, "rows"))
				defer rdr.Release()
				m.minor++
				if _, err := s.Put(ctx, keys, rdr, PutOptions{SchemaVersion: m.sv()}); err != nil {
					rt.Fatal(err)
				}
				// The new columns follow the old ones, in the append's order.
				for _, f := range order {
					if !slices.ContainsFunc(m.cols, func(g arrow.Field) bool { return g.Name == f.Name }) {
						m.cols = append(m.cols, f)
					}
				}
				m.rows = append(m.rows, rows...)
			},
			"refused": func(rt *rapid.T) {
				next := append([]arrow.Field(nil), m.cols...)
				sv := m.sv()
				switch rapid.IntRange(0, 3).Draw(rt, "how") {
				case 0: // a new column without a higher version
					next = append(next, arrow.Field{Name: "late", Type: arrow.PrimitiveTypes.Int64, Nullable: true})
				case 1: // a new non-nullable column
					next = append(next, arrow.Field{Name: "late", Type: arrow.PrimitiveTypes.Int64})
					sv = fmt.Sprintf("1.%d.0", m.minor+1)
				case 2: // a dropped column
					if len(next) < 2 {
						rt.Skip("nothing to drop")
					}
					next = next[:len(next)-1]
				case 3: // a lower version
					next = append(next, arrow.Field{Name: "late", Type: arrow.PrimitiveTypes.Int64, Nullable: true})
					sv = "0.1.0"
				}
				saved := m.next
				rdr, _ := batch(rt, next, 1)
				defer rdr.Release()
				m.next = saved
				if _, err := s.Put(ctx, keys, rdr, PutOptions{SchemaVersion: sv}); !errors.Is(err, ErrSchemaMismatch) {
					rt.Fatalf("refused append: %v", err)
				}
			},
			"read": check,
			"compact": func(rt *rapid.T) {
				if _, err := s.Compact(ctx, keys, CompactOptions{}); err != nil {
					rt.Fatal(err)
				}
			},
			"restart": func(rt *rapid.T) {
				s = open()
			},
			"": check,
		})
		mem.AssertSize(t, 0)
	})
}
