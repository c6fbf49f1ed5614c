package store

// Dictionary columns through puts and compaction (red team round 10: d02,
// d12, d03): batches with different dictionaries, or a file's dictionary
// shared by rows of many partitions, are stored dictionary-encoded, each
// file holding only the values its rows use, in bounded memory, and read
// back exactly.

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiverdb/quiver/internal/arrowtest"
)

var dictPutSchema = arrow.NewSchema([]arrow.Field{
	{Name: "c", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.Binary}, Nullable: true},
	{Name: "x", Type: arrow.PrimitiveTypes.Int64},
	{Name: "p", Type: arrow.PrimitiveTypes.Int64},
}, nil)

// dictBatch is a batch of dictPutSchema: row i uses vals[idx[i]], has x
// from x0 up and partition p(i).
func dictBatch(idx []int, vals [][]byte, x0 int, p func(i int) int) arrow.RecordBatch {
	mem := memory.DefaultAllocator
	vb := array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary)
	defer vb.Release()
	for _, v := range vals {
		vb.Append(v)
	}
	va := vb.NewArray()
	defer va.Release()
	ib := array.NewInt32Builder(mem)
	defer ib.Release()
	xb := array.NewInt64Builder(mem)
	defer xb.Release()
	pb := array.NewInt64Builder(mem)
	defer pb.Release()
	for i, j := range idx {
		ib.Append(int32(j))
		xb.Append(int64(x0 + i))
		pb.Append(int64(p(i)))
	}
	ia, xa, pa := ib.NewArray(), xb.NewArray(), pb.NewArray()
	defer ia.Release()
	defer xa.Release()
	defer pa.Release()
	d := array.NewDictionaryArray(dictPutSchema.Field(0).Type, ia, va)
	defer d.Release()
	return array.NewRecordBatch(dictPutSchema, []arrow.Array{d, xa, pa}, int64(len(idx)))
}

func TestDictionaryColumnsStoredBounded(t *testing.T) {
	const mib = 1 << 20
	r := rand.New(rand.NewPCG(3, 4))
	val := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}
	zero := func(int) int { return 0 }
	repeat := func(v, n int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = v
		}
		return out
	}
	small := make([][]byte, 300)
	for i := range small {
		small[i] = val(8)
	}
	one, other := val(mib), val(mib)
	eight := make([][]byte, 8)
	for i := range eight {
		eight[i] = val(mib / 4)
	}
	grow := make([][]byte, 16)
	for i := range grow {
		grow[i] = val(mib / 4)
	}
	type putSpec struct {
		mode    Mode
		batches []arrow.RecordBatch
		by      []string
	}
	tests := []struct {
		name    string
		puts    []putSpec
		compact bool
		used    int // bytes of the values the rows use
	}{
		{name: "differing dictionaries in one put (d02)", puts: []putSpec{{mode: ModeWrite, batches: []arrow.RecordBatch{
			dictBatch(repeat(0, 300), small, 0, zero), dictBatch(repeat(0, 64), [][]byte{one}, 300, zero),
		}}}, used: mib + 8},
		{name: "compaction of two files' dictionaries (d12)", puts: []putSpec{
			{mode: ModeWrite, batches: []arrow.RecordBatch{dictBatch(repeat(0, 64), [][]byte{one}, 0, zero)}},
			{mode: ModeAppend, batches: []arrow.RecordBatch{dictBatch(repeat(0, 64), [][]byte{other}, 64, zero)}},
		}, compact: true, used: 2 * mib},
		{name: "partitioned put of one dictionary (d03)", puts: []putSpec{{mode: ModeWrite, by: []string{"p"}, batches: []arrow.RecordBatch{
			dictBatch([]int{0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7}, eight, 0, func(i int) int { return i }),
		}}}, used: 16 * mib / 4},
		{name: "partitioned put of growing dictionaries (d03)", puts: []putSpec{{mode: ModeWrite, by: []string{"p"}, batches: func() []arrow.RecordBatch {
			var out []arrow.RecordBatch
			for i := range grow {
				out = append(out, dictBatch([]int{i}, grow[:i+1], i, func(int) int { return i % 4 }))
			}
			return out
		}()}}, used: 16 * mib / 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			pm := arrowtest.NewPeak()
			mem := memory.NewCheckedAllocator(pm)
			t.Cleanup(func() { mem.AssertSize(t, 0) })
			s, err := Open(dir, WithAllocator(mem), WithLockTimeout(2e9))
			if err != nil {
				t.Fatal(err)
			}
			want := map[int64][]byte{}
			sent := 0
			var last *CommitRecord
			for _, ps := range tc.puts {
				for _, b := range ps.batches {
					d := b.Column(0).(*array.Dictionary)
					vals := d.Dictionary().(*array.Binary)
					for i := range vals.Len() {
						sent += len(vals.Value(i))
					}
					xs := b.Column(1).(*array.Int64)
					for i := range d.Len() {
						want[xs.Value(i)] = vals.Value(d.GetValueIndex(i))
					}
				}
				pm.ResetMax()
				rdr, err := array.NewRecordReader(dictPutSchema, ps.batches)
				if err != nil {
					t.Fatal(err)
				}
				last = put(t, s, ps.mode, []string{"d"}, rdr, PutOptions{PartitionBy: ps.by})
				for _, b := range ps.batches {
					b.Release()
				}
				if limit := int64(4*sent + 8*mib); pm.Max() > limit {
					t.Errorf("the put held %d bytes at its peak for %d bytes of values sent (limit %d)", pm.Max(), sent, limit)
				}
			}
			if tc.compact {
				pm.ResetMax()
				if last, err = s.Compact(context.Background(), []string{"d"}, CompactOptions{}); err != nil {
					t.Fatal(err)
				}
				if limit := int64(4*tc.used + 8*mib); pm.Max() > limit {
					t.Errorf("compaction held %d bytes at its peak for files of %d bytes of values (limit %d)", pm.Max(), tc.used, limit)
				}
			}
			var stored int64
			for _, f := range last.Files {
				stored += f.Bytes
			}
			// The last commit (the only put, or the compaction) holds
			// every row: each file its values once.
			if limit := int64(tc.used + tc.used/4 + 64<<10); stored > limit {
				t.Errorf("stored %d bytes in %d files for %d bytes of values used (limit %d)", stored, len(last.Files), tc.used, limit)
			}
			rdr, err := s.Read(context.Background(), []string{"d"}, ReadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer rdr.Release()
			seen := 0
			for rdr.Next() {
				rec := rdr.RecordBatch()
				c := rec.Column(rec.Schema().FieldIndices("c")[0]).(*array.Dictionary)
				xs := rec.Column(rec.Schema().FieldIndices("x")[0]).(*array.Int64)
				vals := c.Dictionary().(*array.Binary)
				for i := range c.Len() {
					w, ok := want[xs.Value(i)]
					if !ok || c.IsNull(i) || string(vals.Value(c.GetValueIndex(i))) != string(w) {
						t.Fatalf("row x=%d reads back different", xs.Value(i))
					}
					seen++
				}
			}
			if err := rdr.Err(); err != nil {
				t.Fatal(err)
			}
			if seen != len(want) {
				t.Fatalf("%d rows read back, want %d", seen, len(want))
			}
		})
	}
}
