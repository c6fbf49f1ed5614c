package ipcdict

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// bufPayloads writes payloads to a buffer as an IPC stream.
type bufPayloads struct{ b *bytes.Buffer }

func (p bufPayloads) Start() error { return nil }
func (p bufPayloads) WritePayload(pl ipc.Payload) error {
	_, err := pl.WritePayload(p.b)
	return err
}
func (p bufPayloads) Close() error {
	_, err := p.b.Write([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0})
	return err
}

// TestWriterBitExact: float dictionaries at the top level, in a list and
// in a struct, next to a string dictionary, differing per batch only in
// the sign of zero, a NaN payload or less than 1e-5, are read back each
// with its own values; arrow-go's writer alone sends the first batch's
// for all (the test fails with ipc.NewWriter in place of NewWriter).
func TestWriterBitExact(t *testing.T) {
	f64 := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int16, ValueType: arrow.PrimitiveTypes.Float64}
	f32 := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.PrimitiveTypes.Float32}
	str := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "f", Type: f64, Nullable: true},
		{Name: "l", Type: arrow.ListOf(f32), Nullable: true},
		{Name: "s", Type: arrow.StructOf(arrow.Field{Name: "x", Type: f64, Nullable: true}), Nullable: true},
		{Name: "t", Type: str, Nullable: true},
	}, nil)
	rows := []string{
		`[{"f": 0.0, "l": [0.0], "s": {"x": 1.0}, "t": "a"}]`,
		`[{"f": -0.0, "l": [-0.0], "s": {"x": 1.000001}, "t": "a"}]`,
		`[{"f": -0.0, "l": [-0.0], "s": {"x": 1.000001}, "t": "b"}]`,
		`[{"f": 2.0, "l": [], "s": null, "t": null}]`,
	}
	for _, mode := range []string{"ipcdict", "arrow-go"} {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		var buf bytes.Buffer
		var write func(arrow.RecordBatch) error
		var closeW func() error
		if mode == "ipcdict" {
			w := NewWriter(bufPayloads{&buf}, sc, false, ipc.WithAllocator(mem))
			write, closeW = w.Write, w.Close
		} else {
			w := ipc.NewWriter(&buf, ipc.WithSchema(sc), ipc.WithAllocator(mem))
			write, closeW = w.Write, w.Close
		}
		var want []string
		for _, js := range rows {
			rec, _, err := array.RecordFromJSON(mem, sc, strings.NewReader(js))
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, bitsOf(rec))
			if err := write(rec); err != nil {
				t.Fatal(err)
			}
			rec.Release()
		}
		if err := closeW(); err != nil {
			t.Fatal(err)
		}
		rdr, err := ipc.NewReader(&buf, ipc.WithAllocator(mem))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for rdr.Next() {
			got = append(got, bitsOf(rdr.RecordBatch()))
		}
		if err := rdr.Err(); err != nil {
			t.Fatal(err)
		}
		rdr.Release()
		mem.AssertSize(t, 0)
		if same := slices.Equal(got, want); same != (mode == "ipcdict") {
			t.Errorf("%s: read back %q\nwant %q", mode, got, want)
		}
	}
}

// bitsOf renders every float of rec's dictionaries as its bits, row by
// row, with the strings.
func bitsOf(rec arrow.RecordBatch) string {
	var sb strings.Builder
	var walk func(a arrow.Array, i int)
	walk = func(a arrow.Array, i int) {
		if a.IsNull(i) {
			sb.WriteString("null ")
			return
		}
		switch a := a.(type) {
		case *array.Dictionary:
			j := a.GetValueIndex(i)
			switch d := a.Dictionary().(type) {
			case *array.Float64:
				fmt.Fprintf(&sb, "%016x", math.Float64bits(d.Value(j)))
			case *array.Float32:
				fmt.Fprintf(&sb, "%08x", math.Float32bits(d.Value(j)))
			default:
				sb.WriteString(d.ValueStr(j))
			}
			sb.WriteByte(' ')
		case *array.List:
			s, e := a.ValueOffsets(i)
			for k := s; k < e; k++ {
				walk(a.ListValues(), int(k))
			}
		case *array.Struct:
			for k := 0; k < a.NumField(); k++ {
				walk(a.Field(k), i)
			}
		}
	}
	for i := 0; i < int(rec.NumRows()); i++ {
		for _, c := range rec.Columns() {
			walk(c, i)
		}
	}
	return sb.String()
}

// TestFileGuard: the guard passes batches whose dictionaries are those of
// the first (the same values in new arrays included) and refuses, naming
// the column, a string dictionary that changes, a nested one, and a float
// one that differs only in the sign of zero.
func TestFileGuard(t *testing.T) {
	str := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}
	f64 := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.PrimitiveTypes.Float64}
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "s", Type: str, Nullable: true},
		{Name: "l", Type: arrow.ListOf(str), Nullable: true},
		{Name: "f", Type: f64, Nullable: true},
		{Name: "x", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	first := `[{"s": "a", "l": ["p"], "f": 0.0, "x": 1}]`
	cases := []struct {
		name, rows, col string
	}{
		{"same values", `[{"s": "a", "l": ["p"], "f": 0.0, "x": 2}]`, ""},
		{"string dictionary changed", `[{"s": "b", "l": ["p"], "f": 0.0, "x": 2}]`, "s"},
		{"nested dictionary changed", `[{"s": "a", "l": ["q"], "f": 0.0, "x": 2}]`, "l"},
		{"float sign of zero", `[{"s": "a", "l": ["p"], "f": -0.0, "x": 2}]`, "f"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			g := NewFileGuard(sc)
			defer g.Release()
			for i, js := range []string{first, tc.rows} {
				rec, _, err := array.RecordFromJSON(mem, sc, strings.NewReader(js))
				if err != nil {
					t.Fatal(err)
				}
				err = g.Check(rec)
				rec.Release()
				switch {
				case i == 0 || tc.col == "":
					if err != nil {
						t.Fatalf("batch %d: %v", i, err)
					}
				case !errors.Is(err, ErrReplaced) || !strings.Contains(err.Error(), `column "`+tc.col+`"`):
					t.Fatalf("batch %d: %v, want ErrReplaced naming column %q", i, err, tc.col)
				}
			}
		})
	}
}
