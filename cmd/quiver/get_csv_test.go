package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestGetCSVSink: `quiver get` to CSV writes dictionary columns (at any
// depth in lists) as their values, and refuses with an error naming the
// column a type arrow-go's CSV writer has no text form for; the writer
// panicked on both (red team round 10's d07).
func TestGetCSVSink(t *testing.T) {
	str := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}
	i64 := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.PrimitiveTypes.Int64}
	f64 := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Uint16, ValueType: arrow.PrimitiveTypes.Float64}
	cases := []struct {
		name string
		dt   arrow.DataType
		rows string
		want string // the CSV; "error:" and a part of the message
	}{
		{"string", str, `[{"c":"eu"},{"c":null},{"c":"us"},{"c":"eu"}]`, "c\neu\n\nus\neu\n"},
		{"int64", i64, `[{"c":7},{"c":-1},{"c":null}]`, "c\n7\n-1\n\n"},
		{"float64", f64, `[{"c":0.5},{"c":-0.0}]`, "c\n0.5\n-0\n"},
		{"list", arrow.ListOf(str), `[{"c":["a","b"]},{"c":[]},{"c":null}]`, "c\n\"{a,b}\"\n{}\n\n"},
		{"large_list", arrow.LargeListOf(i64), `[{"c":[1]},{"c":[2,2]}]`, "c\n{1}\n\"{2,2}\"\n"},
		{"plain", arrow.BinaryTypes.String, `[{"c":"x"}]`, "c\nx\n"},
		{"struct", arrow.StructOf(arrow.Field{Name: "d", Type: str, Nullable: true}), `[{"c":{"d":"a"}}]`, `error:"c" (struct`},
		{"time32", arrow.FixedWidthTypes.Time32s, `[{"c":"00:00:01"}]`, `error:"c" (time32`},
		{"map", arrow.MapOf(arrow.BinaryTypes.String, str), `[{"c":[{"key":"k","value":"a"}]}]`, `error:"c" (map`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			sc := arrow.NewSchema([]arrow.Field{{Name: "c", Type: c.dt, Nullable: true}}, nil)
			rec, _, err := array.RecordFromJSON(mem, sc, strings.NewReader(c.rows))
			if err != nil {
				t.Fatal(err)
			}
			defer rec.Release()
			var buf bytes.Buffer
			sk, err := newSink(outCSV, &buf, sc, mem)
			if want, ok := strings.CutPrefix(c.want, "error:"); ok {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("error %v, want one naming %s", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := sk.write(rec); err != nil {
				t.Fatal(err)
			}
			if err := sk.close(); err != nil {
				t.Fatal(err)
			}
			if got := buf.String(); got != c.want {
				t.Fatalf("CSV %q, want %q", got, c.want)
			}
		})
	}
}
