package codec

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/quiverdb/quiver/internal/arrowtest"
)

// randBytes is n random bytes (incompressible: a dense copy shows in the
// file's size).
func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// dictArray builds a dictionary array of type dt (byte-array values) with
// indices idx (-1: null) into vals.
func dictArray(mem memory.Allocator, dt *arrow.DictionaryType, idx []int, vals [][]byte) arrow.Array {
	vb := array.NewBuilder(mem, dt.ValueType)
	defer vb.Release()
	for _, v := range vals {
		switch b := vb.(type) {
		case *array.StringBuilder:
			b.Append(string(v))
		case *array.LargeStringBuilder:
			b.Append(string(v))
		case *array.BinaryBuilder:
			b.Append(v)
		case *array.FixedSizeBinaryBuilder:
			b.Append(v)
		default:
			panic("value type")
		}
	}
	va := vb.NewArray()
	defer va.Release()
	ib := array.NewBuilder(mem, dt.IndexType)
	defer ib.Release()
	for _, i := range idx {
		if i < 0 {
			ib.AppendNull()
			continue
		}
		switch b := ib.(type) {
		case *array.Int8Builder:
			b.Append(int8(i))
		case *array.Int32Builder:
			b.Append(int32(i))
		case *array.Uint16Builder:
			b.Append(uint16(i))
		default:
			panic("index type")
		}
	}
	ia := ib.NewArray()
	defer ia.Release()
	return array.NewDictionaryArray(dt, ia, va)
}

func repeat(v, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func count(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// TestDictionaryColumnsWrittenBounded: batches of a file whose
// dictionaries differ are written dictionary-encoded, one dictionary per
// row group holding only the values its rows use, never expanded into
// dense pages (red team round 10's d02, d12: a 1 MiB value referenced by
// every row became one page of all of them, and GBs of memory; d03: every
// partition file kept the batch's whole dictionary). Memory is measured by
// the allocator's peak and the file's size; the values must read back.
func TestDictionaryColumnsWrittenBounded(t *testing.T) {
	const big = 1 << 20
	r := rand.New(rand.NewPCG(1, 2))
	v := func(n int) []byte { return randBytes(r, n) }
	str32 := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}
	bin32 := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.Binary}
	large32 := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.LargeString}
	bin8 := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.Binary}
	binU16 := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Uint16, ValueType: arrow.BinaryTypes.Binary}
	fsb := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: &arrow.FixedSizeBinaryType{ByteWidth: big / 4}}

	type batchSpec struct {
		idx  []int
		vals [][]byte
	}
	small := make([][]byte, 300)
	for i := range small {
		small[i] = v(8)
	}
	one, other := [][]byte{v(big)}, [][]byte{v(big)}
	eight := make([][]byte, 8)
	for i := range eight {
		eight[i] = v(big / 4)
	}
	var growing []batchSpec
	for i := range 24 {
		vals := make([][]byte, i+1)
		for k := range vals {
			if k < i {
				vals[k] = growing[i-1].vals[k]
			} else {
				vals[k] = v(big / 4)
			}
		}
		growing = append(growing, batchSpec{idx: []int{i}, vals: vals})
	}
	tests := []struct {
		name    string
		dt      *arrow.DictionaryType
		nested  string // "", "list" or "struct"
		batches []batchSpec
		// used is the bytes of the distinct values the rows use: the
		// file holds them once (random, so incompressible).
		used      int
		rowGroups int // 0: not checked
	}{
		{name: "string, a big value after small ones (d02)", dt: str32, batches: []batchSpec{{count(300), small}, {repeat(0, 64), one}}, used: big + 300*8},
		{name: "binary, two big values (d12)", dt: bin32, batches: []batchSpec{{repeat(0, 64), one}, {repeat(0, 64), other}}, used: 2 * big},
		{name: "large_string, two big values", dt: large32, batches: []batchSpec{{repeat(0, 64), one}, {repeat(0, 64), other}}, used: 2 * big},
		{name: "int8 index", dt: bin8, batches: []batchSpec{{count(100), small[:100]}, {repeat(0, 64), one}}, used: big + 100*8},
		{name: "list<dictionary>", dt: bin32, nested: "list", batches: []batchSpec{{repeat(0, 64), one}, {repeat(0, 64), other}}, used: 2 * big},
		{name: "struct<dictionary>", dt: bin32, nested: "struct", batches: []batchSpec{{repeat(0, 64), one}, {repeat(0, 64), other}}, used: 2 * big},
		{name: "unused values dropped (d03)", dt: bin32, batches: []batchSpec{{[]int{3}, eight}}, used: big / 4, rowGroups: 1},
		{name: "growing dictionaries (d03)", dt: binU16, batches: growing, used: 24 * big / 4},
		{name: "subset and reordered dictionary: one row group", dt: bin32, batches: []batchSpec{
			{[]int{0, 1, 2, 3, -1}, eight[:4]},
			{[]int{1, 0, 0, -1}, [][]byte{eight[2], eight[1]}},
			{[]int{0, 2}, eight[:4]},
		}, used: big, rowGroups: 1},
		{name: "duplicate values in a dictionary", dt: bin32, batches: []batchSpec{{[]int{0, 1, 2}, [][]byte{one[0], one[0], other[0]}}, {repeat(1, 64), [][]byte{other[0], one[0]}}}, used: 2 * big, rowGroups: 1},
		{name: "big references, then a new small value (d02 reversed)", dt: bin32, batches: []batchSpec{{repeat(0, 64), one}, {[]int{0}, small[:1]}}, used: big + 8},
		{name: "big references in a second row group, then a new small value", dt: bin32, batches: []batchSpec{{[]int{0}, small[:1]}, {repeat(0, 64), one}, {[]int{0}, small[1:2]}}, used: big + 16},
		{name: "a small dictionary made per batch: written as it is, one row group", dt: str32, batches: []batchSpec{{count(100), small[:100]}, {count(100), small[100:200]}, {count(100), small[200:300]}}, used: 300 * 8, rowGroups: 1},
		{name: "fixed-size binary, written dense in bounded writes", dt: fsb, batches: []batchSpec{{repeat(0, 64), [][]byte{eight[0]}}}, used: 64 * big / 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mem, ctx := checkedMem(t)
			var colType arrow.DataType = tc.dt
			switch tc.nested {
			case "list":
				colType = arrow.ListOf(tc.dt)
			case "struct":
				colType = arrow.StructOf(field("d", tc.dt, true))
			}
			sc := schemaOf(field("c", colType, true), field("x", arrow.PrimitiveTypes.Int64, true))
			var recs []arrow.RecordBatch
			sent := 0
			for k, b := range tc.batches {
				d := dictArray(mem, tc.dt, b.idx, b.vals)
				for _, x := range b.vals {
					sent += len(x)
				}
				var col arrow.Array = d
				switch tc.nested {
				case "list":
					off := array.NewInt32Builder(mem)
					off.AppendValues([]int32{0, int32(d.Len() / 2), int32(d.Len())}, nil)
					oa := off.NewArray()
					off.Release()
					ld := array.NewData(colType, 2, []*memory.Buffer{nil, oa.Data().Buffers()[1]}, []arrow.ArrayData{d.Data()}, 0, 0)
					col = array.MakeFromData(ld)
					ld.Release()
					oa.Release()
					d.Release()
				case "struct":
					sd := array.NewData(colType, d.Len(), []*memory.Buffer{nil}, []arrow.ArrayData{d.Data()}, 0, 0)
					col = array.MakeFromData(sd)
					sd.Release()
					d.Release()
				}
				xb := array.NewInt64Builder(mem)
				for i := 0; i < col.Len(); i++ {
					xb.Append(int64(k*1000 + i))
				}
				xa := xb.NewArray()
				xb.Release()
				recs = append(recs, array.NewRecordBatch(sc, []arrow.Array{col, xa}, int64(col.Len())))
				col.Release()
				xa.Release()
			}
			defer func() {
				for _, rec := range recs {
					rec.Release()
				}
			}()
			peak := arrowtest.NewPeak()
			for _, serial := range []bool{false, true} {
				peak.ResetMax()
				b := writeFile(t, sc, WriterOptions{Allocator: peak, Serial: serial}, recs...)
				// The encoder holds the row group's dictionary pages
				// and little else; a dense copy of the values would be
				// 64 MiB.
				if limit := int64(4*sent + 4<<20); peak.Max() > limit {
					t.Errorf("serial=%v: the writer held %d bytes at its peak for %d bytes of dictionary values sent (limit %d)", serial, peak.Max(), sent, limit)
				}
				if limit := tc.used + tc.used/4 + 64<<10; len(b) > limit {
					t.Errorf("serial=%v: file of %d bytes for %d bytes of values used (limit %d)", serial, len(b), tc.used, limit)
				}
				pr, err := file.NewParquetReader(bytes.NewReader(b))
				if err != nil {
					t.Fatal(err)
				}
				if tc.rowGroups > 0 && pr.NumRowGroups() != tc.rowGroups {
					t.Errorf("serial=%v: %d row groups, want %d", serial, pr.NumRowGroups(), tc.rowGroups)
				}
				for g := range pr.NumRowGroups() {
					cc, err := pr.MetaData().RowGroup(g).ColumnChunk(0)
					if err != nil {
						t.Fatal(err)
					}
					if n := cc.TotalUncompressedSize(); n > int64(tc.used)+4<<20 {
						t.Errorf("serial=%v: row group %d's column chunk holds %d bytes uncompressed", serial, g, n)
					}
				}
				pr.Close()
				// Batch by batch: arrow-go cannot concatenate
				// dictionaries of large strings.
				var want [][2]int // (batch, row) of each row written
				for k, rec := range recs {
					for j := 0; j < int(rec.NumRows()); j++ {
						want = append(want, [2]int{k, j})
					}
				}
				row := 0
				err = eachBatch(t, ctx, b, ReadOptions{Allocator: mem, BatchRows: 7}, func(got arrow.RecordBatch) {
					for i, f := range sc.Fields() {
						c, err := ConformArray(ctx, got.Column(i), f.Type)
						if err != nil {
							t.Fatalf("column %q: %v", f.Name, err)
						}
						for j := 0; j < c.Len(); j++ {
							if row+j >= len(want) {
								t.Fatalf("serial=%v: more rows read back than written", serial)
							}
							w := want[row+j]
							if !sameValue(c, j, recs[w[0]].Column(i), w[1]) {
								t.Fatalf("serial=%v: column %q row %d reads back different", serial, f.Name, row+j)
							}
						}
						c.Release()
					}
					row += int(got.NumRows())
				})
				if err != nil {
					t.Fatalf("serial=%v: read: %v", serial, err)
				}
				if row != len(want) {
					t.Fatalf("serial=%v: %d rows read back, want %d", serial, row, len(want))
				}
			}
		})
	}
}

// TestDictionaryLeafSmallForFewRows: a row group's dictionary leaf set
// from a few rows of a batch with a large dictionary (a partition's share
// of a pandas categorical), then given more rows of the same dictionary,
// holds what those rows use, not a table of the whole dictionary: every
// partition of a put held two tables of it, 20 MiB a partition for a
// 500,000-value dictionary, and 256 partitions of one 4,000-row batch
// peaked at 5.2 GiB (red team round 51's p01). Also when the unused values
// cost no bytes (empty strings, nulls): they were kept whole, table and
// all.
func TestDictionaryLeafSmallForFewRows(t *testing.T) {
	const n = 200_000
	for _, tc := range []struct {
		name  string
		value func(i int) []byte // nil: null
	}{
		{"distinct values", func(i int) []byte { return []byte(fmt.Sprintf("value-%07d", i)) }},
		{"empty values", func(i int) []byte {
			if i%7919 == 0 {
				return []byte(fmt.Sprint(i))
			}
			return []byte{}
		}},
		{"null values", func(i int) []byte {
			if i%7919 == 0 {
				return []byte(fmt.Sprint(i))
			}
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { testLeafSmall(t, n, tc.value) })
	}
}

func testLeafSmall(t *testing.T, n int, value func(i int) []byte) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	vb := array.NewStringBuilder(mem)
	for i := range n {
		if v := value(i); v != nil {
			vb.Append(string(v))
		} else {
			vb.AppendNull()
		}
	}
	dictVals := vb.NewArray()
	vb.Release()
	defer dictVals.Release()
	ib := array.NewInt32Builder(mem)
	for i := range 64 {
		ib.Append(int32((i * 7919) % n))
	}
	ia := ib.NewArray()
	ib.Release()
	defer ia.Release()
	dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}
	whole := array.NewDictionaryArray(dt, ia, dictVals)
	defer whole.Release()
	first := array.NewSlice(whole, 0, 16)
	defer first.Release()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var l dictLeaf
	if err := l.set(first.Data(), mem); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	defer l.release()
	if got := after.TotalAlloc - before.TotalAlloc; got > 64<<10 {
		t.Errorf("set allocated %d bytes for 16 rows of a %d-value dictionary", got, n)
	}
	if l.trans.dense != nil || len(l.trans.sparse) > 16 || len(l.index) > 16 || l.vals.Len() > 16 {
		t.Errorf("leaf of 16 rows: dense table %d, sparse %d, index %d, values %d", len(l.trans.dense), len(l.trans.sparse), len(l.index), l.vals.Len())
	}
	rest := array.NewSlice(whole, 16, 64)
	defer rest.Release()
	l.transposable(rest.Data()) // (whether they fit depends on the values)
	if l.trans.dense != nil || len(l.trans.sparse) > 64 {
		t.Errorf("after a look-up of 48 rows: dense table %d, sparse %d", len(l.trans.dense), len(l.trans.sparse))
	}
	// Rows of the leaf's own values fit, and are transposed onto its.
	again := array.NewSlice(whole, 3, 9)
	defer again.Release()
	if !l.transposable(again.Data()) {
		t.Fatal("rows of the leaf's own values do not fit it")
	}
	out := l.transpose(again.Data(), mem)
	defer out.Release()
	got := array.MakeFromData(out).(*array.Dictionary)
	defer got.Release()
	want := again.(*array.Dictionary)
	text := func(d *array.Dictionary, i int) string {
		j := d.GetValueIndex(i)
		if d.Dictionary().IsNull(j) {
			return "null"
		}
		return d.Dictionary().(*array.String).Value(j)
	}
	for i := range got.Len() {
		if g, w := text(got, i), text(want, i); g != w {
			t.Fatalf("row %d: %q after transposing, %q sent", i, g, w)
		}
	}
}

// TestFoldDictNullsLargeDictionary: a few rows of a large dictionary with
// a null value are folded looking at the values they use, and keep only
// those: a pass over (and a copy of) the whole dictionary for each batch
// of each partition took a 256-partition put from 1.6 to 50 s of CPU (red
// team round 52's p01). The rows read the same values as before.
func TestFoldDictNullsLargeDictionary(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	const n = 200_000
	vb := array.NewStringBuilder(mem)
	for i := range n {
		if i == 5 {
			vb.AppendNull()
			continue
		}
		vb.Append(fmt.Sprintf("v%d", i))
	}
	vals := vb.NewArray()
	vb.Release()
	defer vals.Release()
	ib := array.NewInt32Builder(mem)
	ib.AppendValues([]int32{5, 10, n - 1, 10, 0}, []bool{true, true, true, true, false})
	ia := ib.NewArray()
	ib.Release()
	defer ia.Release()
	dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}
	d := array.NewDictionaryArray(dt, ia, vals)
	defer d.Release()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	out, err := foldDictNulls(d, mem)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Release()
	// (The compute kernels' own set-up is about 240 KB; the whole
	// dictionary's remap and copy were 8 MB.)
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Errorf("folding 5 rows of a %d-value dictionary allocated %d bytes", n, got)
	}
	f := out.(*array.Dictionary)
	if f.Dictionary().Len() != 2 || f.Dictionary().NullN() != 0 {
		t.Errorf("folded dictionary: %d values, %d null; want the 2 used", f.Dictionary().Len(), f.Dictionary().NullN())
	}
	want := []string{"null", "v10", fmt.Sprintf("v%d", n-1), "v10", "null"}
	for i, w := range want {
		g := "null"
		if f.IsValid(i) {
			g = f.Dictionary().(*array.String).Value(f.GetValueIndex(i))
		}
		if g != w {
			t.Errorf("row %d: %s, want %s", i, g, w)
		}
	}
}
