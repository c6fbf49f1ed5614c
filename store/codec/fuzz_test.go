package codec

import (
	"bytes"
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// fuzzSource hands out fuzz bytes; zeros once they run out.
type fuzzSource struct{ b []byte }

func (s *fuzzSource) byte() byte {
	if len(s.b) == 0 {
		return 0
	}
	c := s.b[0]
	s.b = s.b[1:]
	return c
}

func (s *fuzzSource) intn(n int) int { return int(s.byte()) % n }

func (s *fuzzSource) bytes(n int) []byte {
	out := make([]byte, n)
	for i := range out {
		out[i] = s.byte()
	}
	return out
}

// fuzzType picks a type; nested ones only above depth 0.
func (s *fuzzSource) fuzzType(depth int) arrow.DataType {
	leaves := []arrow.DataType{
		arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Int64, arrow.FixedWidthTypes.Boolean,
		arrow.BinaryTypes.String, arrow.BinaryTypes.LargeString, arrow.BinaryTypes.Binary,
		&arrow.Decimal128Type{Precision: 4, Scale: 1}, arrow.FixedWidthTypes.Date64, arrow.PrimitiveTypes.Float64,
		&arrow.FixedSizeBinaryType{ByteWidth: 3},
		&arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String},
		arrow.BinaryTypes.StringView,
	}
	k := s.intn(len(leaves) + 6)
	if depth == 0 || k < len(leaves) {
		return leaves[k%len(leaves)]
	}
	child := func(name string) arrow.Field {
		return arrow.Field{Name: name, Type: s.fuzzType(depth - 1), Nullable: s.intn(2) == 0}
	}
	switch k - len(leaves) {
	case 0:
		return arrow.ListOfField(child("item"))
	case 1:
		return arrow.LargeListOfField(child("item"))
	case 2:
		return arrow.StructOf(child("a"), child("b"))
	case 3:
		return arrow.MapOfFields(arrow.Field{Name: "key", Type: arrow.BinaryTypes.String}, child("value"))
	case 4:
		return arrow.ListViewOfField(child("item"))
	default:
		return arrow.FixedSizeListOfField(2, child("item"))
	}
}

// fuzzData builds array data of type dt from fuzz bytes: sometimes
// consistent, often not.
func (s *fuzzSource) fuzzData(dt arrow.DataType, n int) arrow.ArrayData {
	n = max(n, 0)
	offset := s.intn(3)
	if s.intn(4) == 0 {
		offset = 0
	}
	total := n + offset
	var validity *memory.Buffer
	nulls := 0
	if s.intn(2) == 0 {
		validity = memory.NewBufferBytes(s.bytes((total + 7) / 8))
		nulls = array.UnknownNullCount
		if s.intn(4) == 0 {
			nulls = s.intn(n + 1) // often a lie
		}
	}
	fixed := func(width int) *memory.Buffer {
		size := total * width
		if s.intn(8) == 0 {
			size = s.intn(size + 1)
		}
		return memory.NewBufferBytes(s.bytes(size))
	}
	// offsets: monotonic within [0, limit] unless the fuzzer says otherwise.
	offsets := func(limit int, wide bool) (*memory.Buffer, int) {
		vals := make([]int64, total+1)
		cur := 0
		for i := 1; i <= total; i++ {
			cur += s.intn(3)
			vals[i] = int64(cur)
		}
		if s.intn(6) == 0 {
			vals[s.intn(total+1)] = int64(s.byte()) - 4
		}
		end := max(int(vals[total]), 0)
		if wide {
			return memory.NewBufferBytes(arrow.Int64Traits.CastToBytes(vals)), end
		}
		v32 := make([]int32, len(vals))
		for i, v := range vals {
			v32[i] = int32(v)
		}
		return memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(v32)), end
	}
	switch t := dt.(type) {
	case *arrow.BooleanType:
		return array.NewData(dt, n, []*memory.Buffer{validity, fixed(1)}, nil, nulls, offset)
	case *arrow.StringType, *arrow.BinaryType, *arrow.LargeStringType:
		wide := dt.ID() == arrow.LARGE_STRING
		off, end := offsets(0, wide)
		data := s.bytes(end + s.intn(2))
		return array.NewData(dt, n, []*memory.Buffer{validity, off, memory.NewBufferBytes(data)}, nil, nulls, offset)
	case *arrow.DictionaryType:
		d := s.fuzzData(t.ValueType, 1+s.intn(4))
		defer d.Release()
		out := array.NewData(dt, n, []*memory.Buffer{validity, fixed(1)}, nil, nulls, offset)
		out.SetDictionary(d)
		return out
	case *arrow.ListType, *arrow.LargeListType, *arrow.MapType:
		off, end := offsets(0, dt.ID() == arrow.LARGE_LIST)
		c := s.fuzzData(t.(arrow.ListLikeType).Elem(), end+s.intn(2))
		defer c.Release()
		return array.NewData(dt, n, []*memory.Buffer{validity, off}, []arrow.ArrayData{c}, nulls, offset)
	case *arrow.StringViewType:
		data := memory.NewBufferBytes(s.bytes(s.intn(40)))
		return array.NewData(dt, n, []*memory.Buffer{validity, fixed(arrow.ViewHeaderSizeBytes), data}, nil, nulls, offset)
	case *arrow.ListViewType:
		c := s.fuzzData(t.Elem(), s.intn(6))
		defer c.Release()
		return array.NewData(dt, n, []*memory.Buffer{validity, fixed(4), fixed(4)}, []arrow.ArrayData{c}, nulls, offset)
	case *arrow.FixedSizeListType:
		c := s.fuzzData(t.Elem(), total*2-s.intn(2))
		defer c.Release()
		return array.NewData(dt, n, []*memory.Buffer{validity}, []arrow.ArrayData{c}, nulls, offset)
	case *arrow.StructType:
		kids := make([]arrow.ArrayData, t.NumFields())
		for i, f := range t.Fields() {
			kids[i] = s.fuzzData(f.Type, total-s.intn(2))
			defer kids[i].Release()
		}
		// The children carry their own offsets: slice the struct from 0.
		return array.NewData(dt, n, []*memory.Buffer{validity}, kids, nulls, 0)
	default:
		return array.NewData(dt, n, []*memory.Buffer{validity, fixed(dt.(arrow.FixedWidthDataType).BitWidth() / 8)}, nil, nulls, offset)
	}
}

// build makes an array as arrow-go would hand one over, or reports that
// arrow-go itself refuses these buffers (such input never reaches us).
func build(d arrow.ArrayData) (a arrow.Array, ok bool) {
	defer func() {
		if recover() != nil {
			a, ok = nil, false
		}
	}()
	return array.MakeFromData(d), true
}

// FuzzValidateBatch builds batches of random types and buffers and checks
// that ValidateBatch never panics and that whatever it accepts is either
// written to Parquet and read back unchanged, or refused by the writer as
// the data's fault (ErrInvalid) — never a panic.
func FuzzValidateBatch(f *testing.F) {
	for _, seed := range [][]byte{
		{0, 3, 0, 1, 2, 3, 4, 5, 6, 7},
		{3, 4, 1, 0, 1, 1, 1, 1, 'a', 'b', 'c', 'd'},
		{13, 3, 0, 1, 1, 2, 1, 1, 0, 0, 0, 0},
		{14, 2, 1, 1, 2, 0, 0, 7, 7, 7, 7},
		{15, 3, 0, 1, 3, 1, 1, 2, 1, 2},
		{12, 2, 9, 0, 1, 0, 1, 1},
		{10, 4, 0, 1, 0, 0, 0, 1, 2, 3, 0, 1, 0, 1},
		{6, 2, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s := &fuzzSource{b: b}
		dt := s.fuzzType(2)
		n := s.intn(6)
		nullable := s.intn(3) != 0
		d := s.fuzzData(dt, n)
		col, ok := build(d)
		d.Release()
		if !ok {
			t.Skip("arrow-go refuses these buffers itself")
		}
		defer col.Release()
		sc := schemaOf(field("c", dt, nullable))
		rec := array.NewRecordBatch(sc, []arrow.Array{col}, int64(col.Len()))
		defer rec.Release()
		if ValidateBatch(rec) != nil {
			return
		}
		want := rowsJSON(t, rec)
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		var out bytes.Buffer
		fw, err := NewFileWriter(&out, sc, WriterOptions{Allocator: mem})
		if err == nil {
			if err = fw.Write(rec); err == nil {
				err = fw.Close()
			}
			if err != nil {
				fw.Abort()
			}
		}
		if err != nil {
			// (No allocator check here: pqarrow v18.8 does not release the
			// levels of a column it refuses; the Go allocator reclaims them.)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("%s %s: the writer failed with %v, not ErrInvalid", dt, want, err)
			}
			return
		}
		defer mem.AssertSize(t, 0)
		_, ctx := checkedMem(t)
		var at int64
		err = eachBatch(t, ctx, out.Bytes(), ReadOptions{Allocator: mem, BatchRows: 2}, func(read arrow.RecordBatch) {
			got, err := ConformArray(ctx, read.Column(0), dt)
			if err != nil {
				t.Fatalf("%s: %v", dt, err)
			}
			n := int64(got.Len())
			if at+n > rec.NumRows() {
				t.Fatalf("%s: read back more rows than written", dt)
			}
			exp := array.NewSlice(rec.Column(0), at, at+n)
			same := sameValues(got, exp)
			exp.Release()
			got.Release()
			if !same {
				t.Fatalf("%s: rows %d… read back differ from %s", dt, at, want)
			}
			at += n
		})
		if err != nil || at != rec.NumRows() {
			t.Fatalf("%s: read back %d of %d rows: %v", dt, at, rec.NumRows(), err)
		}
	})
}
