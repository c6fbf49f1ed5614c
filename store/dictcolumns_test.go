package store

// Dictionary columns through puts, reads and compaction (red team round
// 10).

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// dictRows is JSON rows (readAll's) as a sorted list of rows, each
// re-marshalled with its keys sorted: partitions come back in their own
// order.
func dictRows(t *testing.T, rows string) []string {
	t.Helper()
	var vs []map[string]any
	if err := json.Unmarshal([]byte(rows), &vs); err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(vs))
	for i, v := range vs {
		b, _ := json.Marshal(v)
		out[i] = string(b)
	}
	slices.Sort(out)
	return out
}

// TestPartitionedNestedDictionaryEmpty: a partitioned put of a column of
// dictionaries nested in lists (and other nestings) where a partition's
// rows hold no dictionary value at all (empty or null lists): pqarrow
// reads that partition's file with no dictionary, and joining its batches
// with the others' (a read, compact) dereferenced it (red team round 10's
// d09; d10 when every row is so).
func TestPartitionedNestedDictionaryEmpty(t *testing.T) {
	dict := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}
	dict8 := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.PrimitiveTypes.Int64}
	cases := []struct {
		name string
		dt   arrow.DataType
		rows string
	}{
		{"list", arrow.ListOf(dict), `[{"c":["a"],"p":0},{"c":[],"p":1},{"c":null,"p":1}]`},
		{"list all empty", arrow.ListOf(dict), `[{"c":[],"p":0},{"c":[],"p":1}]`},
		{"large_list", arrow.LargeListOf(dict), `[{"c":["a","b"],"p":0},{"c":[],"p":1}]`},
		{"list int8 int64", arrow.ListOf(dict8), `[{"c":[7],"p":0},{"c":[],"p":1},{"c":[],"p":2}]`},
		{"fixed_size_list", arrow.FixedSizeListOf(1, dict), `[{"c":["a"],"p":0},{"c":null,"p":1}]`},
		{"list of struct", arrow.ListOf(arrow.StructOf(arrow.Field{Name: "d", Type: dict, Nullable: true})), `[{"c":[{"d":"a"}],"p":0},{"c":[],"p":1}]`},
		{"map", arrow.MapOf(arrow.BinaryTypes.String, dict), `[{"c":[{"key":"k","value":"a"}],"p":0},{"c":[],"p":1}]`},
		{"struct", arrow.StructOf(arrow.Field{Name: "d", Type: dict, Nullable: true}), `[{"c":{"d":"a"},"p":0},{"c":null,"p":1}]`},
	}
	for _, c := range cases {
		for _, parted := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/partitioned=%v", c.name, parted), func(t *testing.T) {
				s, _ := newTestStore(t)
				sc := arrow.NewSchema([]arrow.Field{{Name: "c", Type: c.dt, Nullable: true}, {Name: "p", Type: arrow.PrimitiveTypes.Int32, Nullable: true}}, nil)
				o := PutOptions{}
				if parted {
					o.PartitionBy = []string{"p"}
				}
				keys := []string{"d", "nested"}
				put(t, s, ModeWrite, keys, fromJSON(t, sc, c.rows), o)
				want := dictRows(t, c.rows)
				for _, step := range []string{"read", "append", "compact"} {
					switch step {
					case "append":
						put(t, s, ModeAppend, keys, fromJSON(t, sc, c.rows), o)
						want = append(want, want...)
						slices.Sort(want)
					case "compact":
						if _, err := s.Compact(context.Background(), keys, CompactOptions{}); err != nil {
							t.Fatalf("compact: %v", err)
						}
					}
					// batches as they are read, and joined
					for _, join := range []bool{false, true} {
						_, got := readAll(t, s, keys, ReadOptions{Join: join})
						if g := dictRows(t, got); !slices.Equal(g, want) {
							t.Fatalf("%s (join %v): read back %v, want %v", step, join, g, want)
						}
					}
				}
			})
		}
	}
}

// TestFloatDictionaryAppendsBitExact: appends whose float dictionaries
// differ only in the sign of zero or a NaN payload read back bit for bit,
// joined or not, before and after compact (red team round 10's d01).
func TestFloatDictionaryAppendsBitExact(t *testing.T) {
	dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int16, ValueType: arrow.PrimitiveTypes.Float64}
	sc := arrow.NewSchema([]arrow.Field{{Name: "v", Type: dt, Nullable: true}}, nil)
	for _, vals := range [][]uint64{
		{0, 1 << 63},
		{1 << 63, 0},
		{0x7FF8000000000001, 0x7FF8000000000002, 0x7FF8000000000001},
		{math.Float64bits(1), math.Float64bits(1.000001)},
	} {
		t.Run(fmt.Sprintf("%x", vals), func(t *testing.T) {
			s, _ := newTestStore(t)
			keys := []string{"f", "d"}
			for i, bits := range vals {
				b := array.NewDictionaryBuilder(memory.DefaultAllocator, dt).(*array.Float64DictionaryBuilder)
				if err := b.Append(math.Float64frombits(bits)); err != nil {
					t.Fatal(err)
				}
				col := b.NewArray()
				b.Release()
				rec := array.NewRecordBatch(sc, []arrow.Array{col}, 1)
				col.Release()
				rdr, _ := array.NewRecordReader(sc, []arrow.RecordBatch{rec})
				rec.Release()
				mode := ModeWrite
				if i > 0 {
					mode = ModeAppend
				}
				put(t, s, mode, keys, rdr, PutOptions{})
			}
			for _, step := range []string{"read", "compact"} {
				if step == "compact" {
					if _, err := s.Compact(context.Background(), keys, CompactOptions{}); err != nil {
						t.Fatal(err)
					}
				}
				for _, join := range []bool{false, true} {
					rdr, err := s.Read(context.Background(), keys, ReadOptions{Join: join})
					if err != nil {
						t.Fatal(err)
					}
					var got []uint64
					for rdr.Next() {
						d := rdr.RecordBatch().Column(0).(*array.Dictionary)
						for i := 0; i < d.Len(); i++ {
							got = append(got, math.Float64bits(d.Dictionary().(*array.Float64).Value(d.GetValueIndex(i))))
						}
					}
					err = rdr.Err()
					rdr.Release()
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(got, vals) {
						t.Fatalf("%s (join %v): bits %x, want %x", step, join, got, vals)
					}
				}
			}
		})
	}
}
