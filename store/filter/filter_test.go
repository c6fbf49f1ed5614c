package filter

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"pgregory.net/rapid"
)

var testSchema = arrow.NewSchema([]arrow.Field{
	{Name: "region", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "total", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	{Name: "d", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond}, Nullable: true},
	{Name: "s", Type: arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int64}), Nullable: true},
	{Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "big", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "flag", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	{Name: "f32", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
}, nil)

const testRows = `[
 {"region": "eu", "total": 150, "d": "2024-01-02", "ts": "2023-12-31T23:59:59.999999", "f": 1.5, "big": 7, "flag": true, "f32": 0.1},
 {"region": "us", "total": 50, "d": "2024-01-01", "ts": "2024-01-01T00:00:00", "f": null, "big": 9, "flag": false},
 {"region": null, "total": 101, "d": null, "ts": null, "f": 2.5, "big": null, "flag": null},
 {"region": "a", "total": null, "d": "2025-06-01", "ts": "2020-01-01T00:00:00", "f": 3, "big": 5, "flag": true},
 {"region": "b", "total": 100, "d": "2023-01-01", "ts": "2024-02-01T00:00:00", "f": -1, "big": 6, "flag": false}
]`

func testBatch(t *testing.T) arrow.RecordBatch {
	t.Helper()
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, testSchema, strings.NewReader(testRows))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rec.Release)
	return rec
}

// mask evaluates a filter on testRows: "T", "F" or "N" per row.
func mask(t *testing.T, e *Expr) string {
	t.Helper()
	b, err := Bind(e, testSchema)
	if err != nil {
		t.Fatalf("bind %s: %v", e, err)
	}
	m, err := b.Mask(testBatch(t))
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	for _, x := range m {
		sb.WriteByte("TFN"[[]int{1, 0, 2}[x]])
	}
	return sb.String()
}

func TestWhereEval(t *testing.T) {
	for _, c := range []struct{ where, want string }{
		{"region = 'eu'", "TFNFF"},
		{"region = eu and total > 100", "TFNFF"},
		{"total > 100 or region = 'b'", "TFTNT"},
		{"not total > 100", "FTFNT"},
		{"region is null", "FFTFF"},
		{"region is not null", "TTFTT"},
		{"total in (50, 100)", "FTFNT"},
		{"total not in (50, 100)", "TFTNF"},
		{"d >= '2024-01-02'", "TFNTF"},
		{"ts < '2024-01-01T00:00:00Z'", "TFNTF"},
		{"ts <= '2024-01-01'", "TTNTF"},
		{"f <= 2.5", "TNTFT"},
		{"f != 1.5", "FNTTT"},
		{"flag = true", "TFNTF"},
		{"flag < true", "FTNFT"},
		{"big != 7", "FTNTT"},
		{`"big" >= 6 and ("region" < 'c' or region > 't')`, "FTNFT"},
		{"(region = 'eu' or region = 'us') and not (big = 9)", "TFNFF"},
		{"f is null or f > 2", "FTTTF"},
		// float32 compared in float64, as pyarrow does (red team h01):
		// the float32 nearest 0.1 is 0.10000000149…
		{"f32 = 0.1", "FNNNN"},
		{"f32 > 0.1", "TNNNN"},
		{"f32 < 0.10000001", "TNNNN"},
		// beyond a narrow column's range: compared in int64 (red team h02)
		{"total = 3000000000", "FFFNF"},
		{"total < 3000000000", "TTTNT"},
	} {
		e, err := ParseWhere(c.where)
		if err != nil {
			t.Errorf("ParseWhere(%q): %v", c.where, err)
			continue
		}
		if got := mask(t, e); got != c.want {
			t.Errorf("%q (%s): %s, want %s", c.where, e, got, c.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, c := range []struct{ where, want string }{
		{"", "empty"},
		{"region", "operator"},
		{"region =", "missing value"},
		{"region = 'eu", "unterminated"},
		{"region = null", "is null"},
		{"(region = 'a'", `")"`},
		{"region in ()", "value"},
		{"region in ('a'", "unterminated"},
		{"and = 1", "column name"},
		{"region ! 1", `"!"`},
		{"region = 1 total = 2", "unexpected"},
		{strings.Repeat("(", 200) + "a = 1" + strings.Repeat(")", 200), "nested"},
		{strings.Repeat("not ", 200) + "a = 1", "nested"},
	} {
		_, err := ParseWhere(c.where)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseWhere(%q): %v, want ErrInvalid mentioning %s", c.where, err, c.want)
		}
	}
	for _, c := range []struct{ json, want string }{
		{`[]`, "want an object"},
		{`{"col": "a"}`, `op`},
		{`{"col": "a", "op": "=", "value": 1, "extra": 2}`, `unknown key "extra"`},
		{`{"col": "a", "op": "=", "value": 1, "col": "b"}`, "twice"},
		{`{"col": "a", "op": "like", "value": 1}`, `"like"`},
		{`{"col": "a", "op": "="}`, "needs a \"value\""},
		{`{"col": "a", "op": "is_null", "value": 1}`, "takes no value"},
		{`{"col": "a", "op": "in", "value": 1}`, "non-empty list"},
		{`{"col": "a", "op": "in", "value": []}`, "non-empty list"},
		{`{"col": "a", "op": "=", "value": null}`, "is_null"},
		{`{"col": "a", "op": "=", "value": [1]}`, "want a string"},
		{`{"col": "", "op": "=", "value": 1}`, "name a column"},
		{`{"and": []}`, "empty list"},
		{`{"and": {}}`, "list of filters"},
		{`{"not": [1]}`, "want an object"},
		{`{"and": [], "or": []}`, "no other keys"},
		{`{"col": "a", "op": "=", "value": 1} x`, "trailing"},
		{strings.Repeat(`{"not":`, 100) + `{"col": "a", "op": "is_null"}` + strings.Repeat("}", 100), "nested"},
	} {
		_, err := ParseJSON([]byte(c.json))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseJSON(%s): %v, want ErrInvalid mentioning %s", c.json, err, c.want)
		}
	}
}

func TestBindErrors(t *testing.T) {
	for _, c := range []struct{ where, want string }{
		{"nope = 1", `"nope": no such column`},
		{"region = 5", `the number 5 is not a utf8 value`},
		{"total = 'x'", `"total"`},
		{"total = 1.5", "not an integer"},
		{"s = 1", "cannot be compared"},
		{"d = '2024-13-01'", "not a date"},
		{"ts = '2024-01-01T00:00:00.0000001Z'", "finer than the column's unit"},
		{"flag = 1", "not a bool value"},
		{"f = true", "not a float64 value"},
	} {
		e, err := ParseWhere(c.where)
		if err != nil {
			t.Fatalf("ParseWhere(%q): %v", c.where, err)
		}
		_, err = Bind(e, testSchema)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Bind(%q): %v, want ErrInvalid mentioning %s", c.where, err, c.want)
		}
	}
}

// The JSON form reads back to the same filter, and --where text of its
// String to the same too.
func TestRoundTrips(t *testing.T) {
	for _, w := range []string{
		"region = 'it''s' and total > 100",
		`"odd name" >= -2.5e3 or not (x in (1, 2, 'three')) or y is null or z is not null`,
		"a != true and b < 0.5 and c <= 7",
	} {
		e, err := ParseWhere(w)
		if err != nil {
			t.Fatal(err)
		}
		j, err := e.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseJSON(j)
		if err != nil {
			t.Fatalf("ParseJSON(%s): %v", j, err)
		}
		if back.String() != e.String() {
			t.Errorf("JSON round trip of %q: %s, want %s", w, back, e)
		}
		again, err := ParseWhere(e.String())
		if err != nil || again.String() != e.String() {
			t.Errorf("String round trip of %q: %v %v", w, again, err)
		}
	}
}

// Substrait expressions pyarrow serialized (testdata/gen_substrait.py)
// select the same rows as the --where text they were written from.
func TestSubstraitFromPyarrow(t *testing.T) {
	b, err := os.ReadFile("testdata/substrait.json")
	if err != nil {
		t.Fatal(err)
	}
	var idx struct{ Cases map[string]string }
	if err := json.Unmarshal(b, &idx); err != nil {
		t.Fatal(err)
	}
	if len(idx.Cases) == 0 {
		t.Fatal("no cases")
	}
	for name, where := range idx.Cases {
		raw, err := os.ReadFile(filepath.Join("testdata", name+".substrait"))
		if err != nil {
			t.Fatal(err)
		}
		e, err := ParseSubstrait(raw)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		w, err := ParseWhere(where)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := mask(t, e), mask(t, w); got != want {
			t.Errorf("%s: substrait %s selects %s, %q selects %s", name, e, got, where, want)
		}
		// Its JSON form (what endpoint tickets carry) selects the same.
		j, _ := e.MarshalJSON()
		back, err := ParseJSON(j)
		if err != nil {
			t.Fatalf("%s: JSON form %s: %v", name, j, err)
		}
		if got, want := mask(t, back), mask(t, w); got != want {
			t.Errorf("%s: JSON form %s selects %s, want %s", name, j, got, want)
		}
	}
	for name, want := range map[string]string{"is_nan": `"is_nan" is not supported`, "add": "must compare a column with a literal"} {
		raw, err := os.ReadFile(filepath.Join("testdata", "unsupported_"+name+".substrait"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ParseSubstrait(raw); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("unsupported %s: %v", name, err)
		}
	}
	if _, err := ParseSubstrait([]byte("not protobuf \xff\xff")); !errors.Is(err, ErrInvalid) {
		t.Errorf("garbage: %v", err)
	}
}

func TestApply(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := testBatch(t)
	for _, c := range []struct {
		where string
		rows  int64
	}{{"total > 100", 2}, {"total > 1000", -1}, {"total is null or total is not null", 5}} {
		b, err := Bind(mustParse(t, c.where), testSchema)
		if err != nil {
			t.Fatal(err)
		}
		out, err := b.Apply(context.Background(), rec, mem)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case c.rows < 0 && out != nil:
			t.Errorf("%q: %d rows, want nil", c.where, out.NumRows())
		case c.rows >= 0 && (out == nil || out.NumRows() != c.rows):
			t.Errorf("%q: %v, want %d rows", c.where, out, c.rows)
		}
		if out != nil {
			out.Release()
		}
	}
}

func mustParse(t *testing.T, s string) *Expr {
	t.Helper()
	e, err := ParseWhere(s)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// The outcome a summary predicts always includes what each row of the
// group actually gives: pruning never drops a row that passes.
func TestOutcomeSound(t *testing.T) {
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "i", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	}, nil)
	ops := []string{"=", "!=", "<", "<=", ">", ">="}
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 6).Draw(t, "n")
		ib := array.NewInt64Builder(memory.DefaultAllocator)
		fb := array.NewFloat64Builder(memory.DefaultAllocator)
		defer ib.Release()
		defer fb.Release()
		var iv []int64
		var fv []float64
		for range n {
			if rapid.Bool().Draw(t, "inull") {
				ib.AppendNull()
			} else {
				v := rapid.Int64Range(-3, 3).Draw(t, "i")
				ib.Append(v)
				iv = append(iv, v)
			}
			if rapid.Bool().Draw(t, "fnull") {
				fb.AppendNull()
			} else {
				v := rapid.SampledFrom([]float64{-1, 0, 1, math.NaN()}).Draw(t, "f")
				fb.Append(v)
				if !math.IsNaN(v) {
					fv = append(fv, v)
				}
			}
		}
		ia, fa := ib.NewArray(), fb.NewArray()
		rec := array.NewRecordBatch(sc, []arrow.Array{ia, fa}, int64(n))
		ia.Release()
		fa.Release()
		defer rec.Release()
		var gen func(depth int) string
		gen = func(depth int) string {
			switch k := rapid.IntRange(0, 5).Draw(t, "kind"); {
			case depth < 3 && k == 0:
				return "(" + gen(depth+1) + " and " + gen(depth+1) + ")"
			case depth < 3 && k == 1:
				return "(" + gen(depth+1) + " or " + gen(depth+1) + ")"
			case depth < 3 && k == 2:
				return "not " + gen(depth+1)
			case k == 3:
				return rapid.SampledFrom([]string{"i", "f"}).Draw(t, "col") + rapid.SampledFrom([]string{" is null", " is not null"}).Draw(t, "null")
			case k == 4:
				return "i in (" + strings.Join([]string{rapid.SampledFrom([]string{"-2", "0", "2"}).Draw(t, "a"), rapid.SampledFrom([]string{"-1", "1", "4"}).Draw(t, "b")}, ", ") + ")"
			}
			return rapid.SampledFrom([]string{"i", "f"}).Draw(t, "col") + " " + rapid.SampledFrom(ops).Draw(t, "op") + " " + rapid.SampledFrom([]string{"-2", "0", "1", "3"}).Draw(t, "v")
		}
		where := gen(0)
		e, err := ParseWhere(where)
		if err != nil {
			t.Fatalf("%q: %v", where, err)
		}
		b, err := Bind(e, sc)
		if err != nil {
			t.Fatalf("%q: %v", where, err)
		}
		m, err := b.Mask(rec)
		if err != nil {
			t.Fatal(err)
		}
		summary := func(col string) Summary {
			a := rec.Column(sc.FieldIndices(col)[0])
			s := Summary{Known: true, Nulls: a.NullN() > 0, Values: a.NullN() < a.Len()}
			if col == "i" && len(iv) > 0 {
				s.HasMinMax, s.min, s.max, s.dt = true, val{i: slices.Min(iv)}, val{i: slices.Max(iv)}, a.DataType()
			}
			if col == "f" && len(fv) > 0 {
				s.HasMinMax, s.min, s.max, s.dt = true, val{f: slices.Min(fv)}, val{f: slices.Max(fv)}, a.DataType()
			}
			return s
		}
		o := b.Eval(summary)
		for i, x := range m {
			if o&(1<<x) == 0 {
				t.Fatalf("%q: row %d is %d, the summary predicts %03b", where, i, x, o)
			}
		}
	})
}

// TestApplyStopsWhenCancelled (red team h03): a filter is evaluated term by
// term with its read's context, and stops when the read is cancelled.
func TestApplyStopsWhenCancelled(t *testing.T) {
	e, err := ParseWhere("total > 100 or region = 'eu' or f < 2")
	if err != nil {
		t.Fatal(err)
	}
	b, err := Bind(e, testSchema)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.Apply(ctx, testBatch(t), nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Apply with a cancelled context: %v", err)
	}
}

// TestTemporalLiteralsInRange (red team review): Substrait times outside a
// day and timestamps outside years 1-9999 are refused, since the ticket's
// text form of the filter could not give them back.
func TestTemporalLiteralsInRange(t *testing.T) {
	for _, c := range []struct {
		v  Value
		ok bool
	}{
		{Value{Kind: KindTime, Int: 3600, Unit: arrow.Second}, true},
		{Value{Kind: KindTime, Int: 90000, Unit: arrow.Second}, false},
		{Value{Kind: KindTime, Int: -1, Unit: arrow.Microsecond}, false},
		{Value{Kind: KindTimestamp, Int: 1700000000000000, Unit: arrow.Microsecond}, true},
		{Value{Kind: KindTimestamp, Int: 300000000000, Unit: arrow.Second}, false},
		{Value{Kind: KindDate, Int: 19000}, true},
		{Value{Kind: KindDate, Int: 4000000}, false},
	} {
		if err := temporalInRange(c.v, "c"); (err == nil) != c.ok {
			t.Errorf("%+v: %v, want ok=%v", c.v, err, c.ok)
		}
	}
}
