package codec

import (
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
)

// TestGatherMatchesTake: gatherBatch gives what compute.Take gives, for
// every flat type (nulls, slices with offsets, empty gathers) and for the
// nested and dictionary columns it hands to Take.
func TestGatherMatchesTake(t *testing.T) {
	mem, ctx := checkedMem(t)
	full := flatBatch(mem, 300, 3)
	defer full.Release()
	list := array.NewListBuilder(mem, arrow.PrimitiveTypes.Int32)
	defer list.Release()
	for i := range 300 {
		if i%5 == 0 {
			list.AppendNull()
			continue
		}
		list.Append(true)
		list.ValueBuilder().(*array.Int32Builder).AppendValues([]int32{int32(i), int32(-i)}, nil)
	}
	la := list.NewArray()
	defer la.Release()
	na := array.MakeArrayOfNull(mem, arrow.Null, 300)
	defer na.Release()
	cols := append(append([]arrow.Array{}, full.Columns()...), la, na)
	fields := append(append([]arrow.Field{}, full.Schema().Fields()...),
		arrow.Field{Name: "list", Type: la.DataType(), Nullable: true}, arrow.Field{Name: "null", Type: arrow.Null, Nullable: true})
	sc := arrow.NewSchema(fields, nil)
	rec := array.NewRecordBatch(sc, cols, 300)
	defer rec.Release()
	rng := rand.New(rand.NewPCG(4, 4))
	for _, tc := range []struct {
		name   string
		lo, hi int64
		n      int
	}{{"whole", 0, 300, 120}, {"slice", 37, 251, 90}, {"none", 10, 20, 0}, {"one", 0, 300, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			src := rec.NewSlice(tc.lo, tc.hi)
			defer src.Release()
			idx := make([]int32, tc.n)
			for k := range idx {
				idx[k] = int32(rng.IntN(int(tc.hi - tc.lo)))
			}
			got, err := gatherBatch(ctx, sc, src, idx)
			if err != nil {
				t.Fatal(err)
			}
			defer got.Release()
			ib := array.NewInt32Builder(mem)
			ib.AppendValues(idx, nil)
			ia := ib.NewArray()
			ib.Release()
			defer ia.Release()
			for i := range int(src.NumCols()) {
				// Everything but the dictionary, list and null columns is
				// gathered directly, not by Take.
				direct := gather(mem, src.Column(i), idx)
				switch name := sc.Field(i).Name; {
				case name == "dict" || name == "list" || name == "null" || name == "nul":
					if direct != nil {
						t.Errorf("column %q gathered directly; want Take", name)
						direct.Release()
					}
				case direct == nil:
					t.Errorf("column %q not gathered directly", name)
				default:
					direct.Release()
				}
				want, err := compute.TakeArray(ctx, src.Column(i), ia)
				if err != nil {
					t.Fatal(err)
				}
				if !array.Equal(got.Column(i), want) {
					t.Errorf("column %q: gathered %v, Take %v", sc.Field(i).Name, got.Column(i), want)
				}
				if got.Column(i).NullN() != want.NullN() {
					t.Errorf("column %q: %d nulls, Take %d", sc.Field(i).Name, got.Column(i).NullN(), want.NullN())
				}
				want.Release()
			}
		})
	}
}
