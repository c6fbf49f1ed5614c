package codec

import (
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestValidateBatchRefusesOversizedPages: a batch whose string or binary
// values would give one Parquet page more than maxPageValueBytes (here
// lowered to 100,000) — pageWriteBatch values in a row, at any depth, or a
// dictionary's values in all — is refused as invalid, naming the column;
// one just under is accepted (red team round 46's p46_01: such a put was
// acknowledged and then unreadable).
func TestValidateBatchRefusesOversizedPages(t *testing.T) {
	defer func(v int64) { maxPageValueBytes = v }(maxPageValueBytes)
	maxPageValueBytes = 100_000
	mem := memory.DefaultAllocator
	vals := func(n, width int, big ...int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = strings.Repeat("x", width)
		}
		for _, i := range big {
			out[i] = strings.Repeat("y", 95_000)
		}
		return out
	}
	str := func(v []string) arrow.Array {
		b := array.NewStringBuilder(mem)
		defer b.Release()
		b.AppendValues(v, nil)
		return b.NewArray()
	}
	large := func(v []string) arrow.Array {
		b := array.NewLargeStringBuilder(mem)
		defer b.Release()
		b.AppendValues(v, nil)
		return b.NewArray()
	}
	bin := func(v []string) arrow.Array {
		b := array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary)
		defer b.Release()
		for _, s := range v {
			b.AppendString(s)
		}
		return b.NewArray()
	}
	list := func(v []string) arrow.Array {
		b := array.NewListBuilder(mem, arrow.BinaryTypes.String)
		defer b.Release()
		for i, s := range v {
			if i%10 == 0 {
				b.Append(true)
			}
			b.ValueBuilder().(*array.StringBuilder).Append(s)
		}
		return b.NewArray()
	}
	dict := func(v []string) arrow.Array {
		b := array.NewDictionaryBuilder(mem, &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}).(*array.BinaryDictionaryBuilder)
		defer b.Release()
		for _, s := range v {
			if err := b.AppendString(s); err != nil {
				t.Fatal(err)
			}
		}
		return b.NewArray()
	}
	sliced := func(a arrow.Array, from, to int) arrow.Array {
		defer a.Release()
		return array.NewSlice(a, int64(from), int64(to))
	}
	distinct := func(n, width int) []string {
		out := vals(n, width)
		for i := range out {
			out[i] = strings.Repeat("x", width-8) + strings.Repeat(string(rune('a'+i%26)), 4) + string(rune('a'+i/26%26)) + string(rune('a'+i/676%26)) + string(rune('a'+i/17576%26)) + "z"
		}
		return out
	}
	cases := []struct {
		name string
		col  arrow.Array
		bad  string // in the error; "" accepted
	}{
		{"string, 2,000 values of 100 bytes", str(vals(2000, 100)), "1024 values in a row hold 102400 bytes"},
		{"string, 900 values of 100 bytes", str(vals(900, 100)), ""},
		{"string, 2,000 values of 97 bytes", str(vals(2000, 97)), ""},
		{"string, one large value among small ones", str(vals(2000, 10, 1500)), "1024 values in a row hold 105230 bytes"},
		{"string, two large values 1,024 apart", str(vals(3000, 1, 100, 1124)), ""},
		{"string, sliced past its large value", sliced(str(vals(3000, 10, 100)), 2000, 3000), ""},
		{"string, a slice holding them", sliced(str(vals(3000, 100)), 500, 2000), "1024 values in a row hold 102400 bytes"},
		{"large_string", large(vals(2000, 100)), "1024 values in a row"},
		{"binary", bin(vals(2000, 100)), "1024 values in a row"},
		{"list of string", list(vals(2000, 100)), "1024 values in a row"},
		{"dictionary of 1,100 values of 100 bytes", dict(distinct(1100, 100)), "the values of its dictionary hold 110000 bytes"},
		{"dictionary of 900 values of 100 bytes", dict(distinct(900, 100)), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			defer tc.col.Release()
			rec := one("v", tc.col, true)
			defer rec.Release()
			err := ValidateBatch(rec)
			switch {
			case tc.bad == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.bad != "" && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.bad) || !strings.Contains(err.Error(), `column "v"`)):
				t.Fatalf("got %v, want ErrInvalid naming column \"v\" and %q", err, tc.bad)
			}
		})
	}
}
