package store

// Dictionary columns through puts, reads and compaction (red team round
// 10).

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
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
			readEachWay(t, s, keys, func(step string, join bool, rdr array.RecordReader) {
				var got []uint64
				for rdr.Next() {
					d := rdr.RecordBatch().Column(0).(*array.Dictionary)
					for i := 0; i < d.Len(); i++ {
						got = append(got, math.Float64bits(d.Dictionary().(*array.Float64).Value(d.GetValueIndex(i))))
					}
				}
				if err := rdr.Err(); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, vals) {
					t.Fatalf("%s (join %v): bits %x, want %x", step, join, got, vals)
				}
			})
		})
	}
}

// TestOrderedDictionaryKeepsOrder: an ordered dictionary whose batches
// carry different dictionaries (growing categories), in one put or in
// appends, reads back, joined or not, before and after compact, each batch
// with a dictionary in the order put. One put's file was written plain and
// read back in order of first appearance, and joining unified dictionaries
// in that order too, which put "medium" after "large" (red team round 10's
// d04).
func TestOrderedDictionaryKeepsOrder(t *testing.T) {
	order := []string{"small", "medium", "large", "xl"}
	rank := map[string]int{}
	for i, v := range order {
		rank[v] = i
	}
	for _, it := range []arrow.DataType{arrow.PrimitiveTypes.Int8, arrow.PrimitiveTypes.Int32} {
		dt := &arrow.DictionaryType{IndexType: it, ValueType: arrow.BinaryTypes.String, Ordered: true}
		sc := arrow.NewSchema([]arrow.Field{{Name: "size", Type: dt, Nullable: true}, {Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)
		mk := func(dict []string, idx []int32) arrow.RecordBatch {
			vb := array.NewStringBuilder(memory.DefaultAllocator)
			vb.AppendValues(dict, nil)
			vals := vb.NewArray()
			vb.Release()
			ib := array.NewInt32Builder(memory.DefaultAllocator)
			ib.AppendValues(idx, nil)
			wide := ib.NewArray()
			ib.Release()
			ia, err := compute.CastArray(context.Background(), wide, compute.SafeCastOptions(it))
			if err != nil {
				t.Fatal(err)
			}
			wide.Release()
			col := array.NewDictionaryArray(dt, ia, vals)
			vals.Release()
			ia.Release()
			n := array.MakeArrayOfNull(memory.DefaultAllocator, arrow.PrimitiveTypes.Int64, col.Len())
			defer n.Release()
			defer col.Release()
			return array.NewRecordBatch(sc, []arrow.Array{col, n}, int64(col.Len()))
		}
		for pi, puts := range [][][]arrow.RecordBatch{
			// one put, two batches (the reproducer's)
			{{mk(order[:3], []int32{2, 0}), mk(order, []int32{1, 3})}},
			// appends
			{{mk([]string{"small", "large"}, []int32{1, 0})}, {mk(order[:3], []int32{1, 2})}},
			// one put, then an append, with dictionaries that join out of order
			{{mk([]string{"medium", "xl"}, []int32{1}), mk([]string{"small", "large"}, []int32{0})}, {mk(order, []int32{2, 1})}},
		} {
			t.Run(fmt.Sprintf("%s/%d", it, pi), func(t *testing.T) {
				s, _ := newTestStore(t)
				keys := []string{"shop", "sizes"}
				var want []string
				for i, recs := range puts {
					for _, rec := range recs {
						d := rec.Column(0).(*array.Dictionary)
						for j := 0; j < d.Len(); j++ {
							want = append(want, strings.Clone(d.Dictionary().(*array.String).Value(d.GetValueIndex(j))))
						}
					}
					rdr, _ := array.NewRecordReader(sc, recs)
					for _, rec := range recs {
						rec.Release()
					}
					mode := ModeWrite
					if i > 0 {
						mode = ModeAppend
					}
					put(t, s, mode, keys, rdr, PutOptions{})
				}
				readEachWay(t, s, keys, func(step string, join bool, rdr array.RecordReader) {
					var got []string
					for rdr.Next() {
						d := rdr.RecordBatch().Column(0).(*array.Dictionary)
						dict := d.Dictionary().(*array.String)
						for j := 1; j < dict.Len(); j++ {
							if rank[dict.Value(j-1)] > rank[dict.Value(j)] {
								t.Errorf("%s, join %v: a batch's ordered dictionary %v is out of order", step, join, dict)
							}
						}
						for j := 0; j < d.Len(); j++ {
							got = append(got, strings.Clone(dict.Value(d.GetValueIndex(j))))
						}
					}
					if err := rdr.Err(); err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(got, want) {
						t.Fatalf("%s, join %v: read %v, want %v", step, join, got, want)
					}
				})
			})
		}
	}
}

// readEachWay calls fn with a read of keys, not joined and joined, then
// again after a compaction of keys; the reader is released after fn.
func readEachWay(t *testing.T, s *Store, keys []string, fn func(step string, join bool, rdr array.RecordReader)) {
	t.Helper()
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
			fn(step, join, rdr)
			rdr.Release()
		}
	}
}
