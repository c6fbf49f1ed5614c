package codec

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// The types polars infers for one column holding these values (pyrosome's
// CsvDal reads CSV profiles with polars), but for the spellings of infinity
// and NaN, which are pyarrow's (polars takes only inf and NaN).
func TestCSVInferenceIsPolars(t *testing.T) {
	cases := []struct {
		values []string
		want   string
	}{
		{[]string{"1", "-2", "007", ""}, "int64"},
		{[]string{"1", "2.5"}, "float64"},
		{[]string{"1e5", ".5", "5.", "-1.5E-3", "+2.0", "inf", "-inf", "NaN"}, "float64"},
		{[]string{"99999999999999999999"}, "float64"}, // too big for int64 (polars fails here)
		{[]string{"true", "FALSE", "True", "tRuE", ""}, "bool"},
		{[]string{"", ""}, "utf8"},
		{[]string{"1", "true"}, "utf8"},
		{[]string{"t", "f"}, "utf8"},
		{[]string{"1", "0"}, "int64"},
		{[]string{"yes"}, "utf8"},
		{[]string{"NULL", "1"}, "utf8"},
		{[]string{"+5"}, "utf8"},
		{[]string{"Inf", "+Inf", "-Inf", "INF", "iNf"}, "float64"}, // quiver get writes +Inf and -Inf
		{[]string{"infinity", "Infinity", "+Infinity", "-INFINITY"}, "float64"},
		{[]string{"nan", "NAN", "nAn", "+nan", "-nan", "-NaN", "+NaN"}, "float64"},
		{[]string{"1.5", "Infinity", "-inf", "nan"}, "float64"},
		{[]string{"infin"}, "utf8"},
		{[]string{"Infinit"}, "utf8"},
		{[]string{"in"}, "utf8"},
		{[]string{"na"}, "utf8"},
		{[]string{"nan(1)"}, "utf8"},
		{[]string{"++inf"}, "utf8"},
		{[]string{"+-nan"}, "utf8"},
		{[]string{" inf"}, "utf8"},
		{[]string{"0x10"}, "utf8"},
		{[]string{"1_000"}, "utf8"},
		{[]string{" 1"}, "utf8"},
		{[]string{"1e"}, "utf8"},
		{[]string{"."}, "utf8"},
		{[]string{"2026-10-24"}, "utf8"},
	}
	for _, c := range cases {
		var inf CSVInference
		if err := inf.AddFile(strings.NewReader("c\n"+strings.Join(c.values, "\n")+"\n"), -1); err != nil {
			t.Fatal(err)
		}
		if got := inf.Schema().Field(0).Type.String(); got != c.want {
			t.Errorf("%q: %s, want %s", c.values, got, c.want)
		}
	}
}

func TestCSVInferenceOverFiles(t *testing.T) {
	var inf CSVInference
	for _, f := range []string{"a,b,c\n1,x,\n", "c,a,b\n2.5,2,y\n", ""} {
		if err := inf.AddFile(strings.NewReader(f), -1); err != nil {
			t.Fatal(err)
		}
	}
	if got := inf.Schema().String(); !strings.Contains(got, "a: type=int64") || !strings.Contains(got, "b: type=utf8") || !strings.Contains(got, "c: type=float64") {
		t.Fatalf("schema %s", got)
	}
	if names := strings.Join(FieldNames(inf.Schema()), ","); names != "a,b,c" {
		t.Fatalf("order %s: the first file's header orders the columns", names)
	}
	if err := inf.AddFile(strings.NewReader("a,b\n1,2\n"), -1); !errors.Is(err, ErrSchemaMismatch) {
		t.Errorf("other columns: %v", err)
	}
	var dup CSVInference
	if err := dup.AddFile(strings.NewReader("a,a\n1,2\n"), -1); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `"a" appears twice`) {
		t.Errorf("duplicate column: %v", err)
	}
	var ragged CSVInference
	if err := ragged.AddFile(strings.NewReader("a,b\n1,2,3\n"), -1); err == nil {
		t.Error("a row longer than the header")
	}
	// Only the first rows, when asked.
	var head CSVInference
	if err := head.AddFile(strings.NewReader("a\n1\nx\n"), 1); err != nil || head.Schema().Field(0).Type.ID() != arrow.INT64 {
		t.Errorf("first row only: %v %s", err, head.Schema())
	}
}

func TestCSVReader(t *testing.T) {
	mem, _ := checkedMem(t)
	text := "ok,n,x,s\nTRUE,1,1.5,a\ntRuE,,inf,\nfalse,3,,\"c,d\"\n"
	var inf CSVInference
	if err := inf.AddFile(strings.NewReader(text), -1); err != nil {
		t.Fatal(err)
	}
	sc := inf.Schema()
	for _, c := range []struct {
		cols []string
		want string
	}{
		{nil, `[{"n":1,"ok":true,"s":"a","x":1.5},{"n":null,"ok":true,"s":null,"x":"+Inf"}]|[{"n":3,"ok":false,"s":"c,d","x":null}]`},
		{[]string{"s", "ok"}, `[{"ok":true,"s":"a"},{"ok":true,"s":null}]|[{"ok":false,"s":"c,d"}]`},
		{[]string{}, `[{},{}]|[{}]`},
	} {
		rr, err := NewCSVReader(strings.NewReader(text), sc, c.cols, ReadOptions{Allocator: mem, BatchRows: 2})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for rr.Next() {
			got = append(got, rowsJSON(t, rr.RecordBatch()))
		}
		if rr.Err() != nil || strings.Join(got, "|") != c.want {
			t.Errorf("%v: got %s %v, want %s", c.cols, strings.Join(got, "|"), rr.Err(), c.want)
		}
		if c.cols != nil && strings.Join(FieldNames(rr.Schema()), ",") != strings.Join(c.cols, ",") {
			t.Errorf("%v: schema %s", c.cols, rr.Schema())
		}
		rr.Release()
	}
	// The file's own column order, whatever the schema's.
	rr, err := NewCSVReader(strings.NewReader("s,ok\nz,false\n"), sc, nil, ReadOptions{Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	if !rr.Next() || rowsJSON(t, rr.RecordBatch()) != `[{"ok":false,"s":"z"}]` || strings.Join(FieldNames(rr.Schema()), ",") != "s,ok" {
		t.Errorf("reordered file: %v", rr.Err())
	}
	rr.Release()
	// No header at all: no batches.
	rr, err = NewCSVReader(strings.NewReader(""), sc, nil, ReadOptions{Allocator: mem})
	if err != nil || rr.Next() {
		t.Errorf("empty input: %v", err)
	}
	rr.Release()
	if _, err := NewCSVReader(strings.NewReader("zz\n1\n"), sc, nil, ReadOptions{Allocator: mem}); !errors.Is(err, ErrSchemaMismatch) {
		t.Errorf("unknown column: %v", err)
	}
	rr, err = NewCSVReader(strings.NewReader("ok\nmaybe\n"), sc, nil, ReadOptions{Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	if rr.Next() || rr.Err() == nil || !strings.Contains(rr.Err().Error(), `"maybe", not a boolean`) {
		t.Errorf("bad boolean: %v", rr.Err())
	}
	rr.Release()
}

// Floats written as CSV infer back as floats, whole or not.
func TestCSVRoundTripKeepsTypes(t *testing.T) {
	mem, _ := checkedMem(t)
	sc := schemaOf(field("x", arrow.PrimitiveTypes.Float64, true), field("n", arrow.PrimitiveTypes.Int8, true),
		field("b", arrow.FixedWidthTypes.Boolean, true), field("d", arrow.FixedWidthTypes.Date32, true))
	rec := batch(t, mem, sc, `[{"x":1,"n":1,"b":true,"d":"2026-01-02"},{"x":null,"n":null,"b":null,"d":null},{"x":1e300,"n":-3,"b":false,"d":"2026-01-03"}]`)
	defer rec.Release()
	b := writeFile(t, sc, WriterOptions{Format: FormatCSV, Allocator: mem}, rec)
	var inf CSVInference
	if err := inf.AddFile(strings.NewReader(string(b)), -1); err != nil {
		t.Fatal(err)
	}
	if got := inf.Schema().String(); !strings.Contains(got, "x: type=float64") || !strings.Contains(got, "n: type=int64") ||
		!strings.Contains(got, "b: type=bool") || !strings.Contains(got, "d: type=utf8") {
		t.Fatalf("inferred %s", got)
	}
}

func FuzzCSVInference(f *testing.F) {
	for _, s := range []string{"a,b\n1,x\n", "a\n\"1\n2\"\n", "a,b\n1\n", "", "a\ntRuE\n", "a\n1e5\n-.5\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		var inf CSVInference
		if inf.AddFile(strings.NewReader(text), -1) != nil {
			return
		}
		sc := inf.Schema()
		if CheckUniqueNames(sc) != nil {
			t.Fatal("inferred duplicate columns")
		}
		// What was inferred from all rows reads without a parse error.
		rr, err := NewCSVReader(strings.NewReader(text), sc, nil, ReadOptions{})
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		defer rr.Release()
		for rr.Next() {
		}
		if err := rr.Err(); err != nil {
			t.Fatalf("%q inferred as %s: %v", text, sc, err)
		}
	})
}

// CSVValueFits accepts a value in a column exactly when inferring the
// column with that value among its rows keeps the column's type (a string
// column takes any text: no value changes in it).
func TestCSVValueFitsIsInference(t *testing.T) {
	windows := [][]string{{"1", "-2"}, {"1.5", "2"}, {"true", "FALSE"}, {"x"}, {""}}
	values := []string{"", "0", "-0", "007", "9223372036854775807", "9223372036854775808", "-9223372036854775809",
		"1.5", "1e400", "-1e-400", "5.", ".5", "+2.0", "inf", "-inf", "NaN", "-NaN", "Inf", "nan", "+5",
		"true", "tRuE", "t", "yes", "NULL", "0x10", "1_000", " 1", "1 ", "1e", ".", "\ufeff1", "١"}
	for _, w := range windows {
		var inf CSVInference
		if err := inf.AddFile(strings.NewReader("c\n"+strings.Join(w, "\n")+"\n"), -1); err != nil {
			t.Fatal(err)
		}
		typ := inf.Schema().Field(0).Type
		for _, v := range values {
			var with CSVInference
			if err := with.AddFile(strings.NewReader("c\n"+strings.Join(append(w[:len(w):len(w)], v), "\n")+"\n"), -1); err != nil {
				t.Fatal(err)
			}
			want := arrow.TypeEqual(with.Schema().Field(0).Type, typ) || typ.ID() == arrow.STRING
			if got := CSVValueFits(typ, v); got != want {
				t.Errorf("%s column (from %q), value %q: fits %v, want %v", typ, w, v, got, want)
			}
		}
	}
	if CSVValueFits(arrow.PrimitiveTypes.Int32, "1") {
		t.Error("an int32 column: CSV inference never makes one")
	}
}

// An append's values must read back as their CSV column's type (red team
// round 18's s02: any cast that succeeded was taken, so 2 became true).
func TestCheckCSVFits(t *testing.T) {
	mem, _ := checkedMem(t)
	target := schemaOf(field("i", arrow.PrimitiveTypes.Int64, true), field("f", arrow.PrimitiveTypes.Float64, true),
		field("b", arrow.FixedWidthTypes.Boolean, true), field("s", arrow.BinaryTypes.String, true))
	cases := []struct {
		name string
		typ  arrow.DataType
		col  string // the target column it goes to
		rows string // JSON values of "v"
		ok   bool
	}{
		{"int into int", arrow.PrimitiveTypes.Int32, "i", `[1, null, -3]`, true},
		{"int into float", arrow.PrimitiveTypes.Int64, "f", `[2]`, true},
		{"int into bool", arrow.PrimitiveTypes.Int64, "b", `[2]`, false},
		{"int into string", arrow.PrimitiveTypes.Int64, "s", `[2]`, true},
		{"float into int", arrow.PrimitiveTypes.Float64, "i", `[2]`, false},
		{"float into bool", arrow.PrimitiveTypes.Float64, "b", `[0.5]`, false},
		{"bool into int", arrow.FixedWidthTypes.Boolean, "i", `[true]`, false},
		{"bool into string", arrow.FixedWidthTypes.Boolean, "s", `[true]`, true},
		{"numeric text into int", arrow.BinaryTypes.String, "i", `["3", null]`, true},
		{"text into int", arrow.BinaryTypes.String, "i", `["3", "x"]`, false},
		{"text into bool", arrow.BinaryTypes.String, "b", `["t"]`, false},
		{"leading zero into int", arrow.BinaryTypes.String, "i", `["05"]`, false},
		{"leading zero into string", arrow.BinaryTypes.String, "s", `["05"]`, true},
		{"unreadable number into float", arrow.BinaryTypes.String, "f", `["1e400"]`, false},
		{"bool text into bool", arrow.BinaryTypes.String, "b", `["TRUE"]`, true},
		{"float text into float", arrow.BinaryTypes.String, "f", `["1.5", "7"]`, true},
		{"timestamp into int", &arrow.TimestampType{Unit: arrow.Second}, "i", `["2024-01-01T00:00:00"]`, false},
		{"timestamp into string", &arrow.TimestampType{Unit: arrow.Second}, "s", `["2024-01-01T00:00:00"]`, true},
		{"nulls only into bool", arrow.PrimitiveTypes.Int64, "b", `[null, null]`, true},
		// Red team round 19's t05.
		{"integer text float64 rounds", arrow.BinaryTypes.String, "f", `["9007199254740993"]`, false},
		{"integer text float64 holds", arrow.BinaryTypes.String, "f", `["9007199254740992", "-100000000000000000000"]`, true},
		{"underflow into float", arrow.BinaryTypes.String, "f", `["1e-400"]`, false},
		{"negative underflow into float", arrow.BinaryTypes.String, "f", `["-1e-400"]`, false},
		{"zeros into float", arrow.BinaryTypes.String, "f", `["0.0", "-0e5", "0"]`, true},
		{"minus zero into float", arrow.BinaryTypes.String, "f", `["-0", "-0.0"]`, true},
		{"minus zero into int", arrow.BinaryTypes.String, "i", `["-0"]`, false},
		{"leading zero into float", arrow.BinaryTypes.String, "f", `["05"]`, false},
		{"leading zeros of a fraction into float", arrow.BinaryTypes.String, "f", `["00.5"]`, false},
		{"fraction into float", arrow.BinaryTypes.String, "f", `["0.5", "-0.25", "5e-324"]`, true},
		{"mixed case bool text into bool", arrow.BinaryTypes.String, "b", `["tRuE", "fALSE"]`, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var fields []arrow.Field
			for _, f := range target.Fields() {
				if f.Name == c.col {
					f.Type = c.typ
				}
				fields = append(fields, f)
			}
			in := schemaOf(fields...)
			var rows []string
			for _, v := range strings.Split(strings.Trim(c.rows, "[]"), ", ") {
				rows = append(rows, `{"`+c.col+`":`+v+`}`)
			}
			rec := batch(t, mem, in, "["+strings.Join(rows, ",")+"]")
			defer rec.Release()
			err := CheckCSVFits(rec, target)
			if c.ok != (err == nil) || (err != nil && !errors.Is(err, ErrSchemaMismatch)) {
				t.Fatalf("got %v, want ok=%v", err, c.ok)
			}
		})
	}
}

// Values a CSV file would lose or could not give back are refused (red
// team round 18's s01 and s04).
func TestCheckCSVValuesRefusesLostRows(t *testing.T) {
	mem, _ := checkedMem(t)
	cases := []struct {
		name string
		sc   *arrow.Schema
		rows string
		want string // "" accepted
	}{
		{"null type column", schemaOf(field("v", arrow.Null, true)), `[{"v":null},{"v":null}]`, "no value in any column"},
		{"null and int", schemaOf(field("v", arrow.Null, true), field("i", arrow.PrimitiveTypes.Int64, true)), `[{"i":1}]`, ""},
		{"1e400", schemaOf(field("s", arrow.BinaryTypes.String, true)), `[{"s":"1e400"}]`, "cannot read back"},
		{"-nan", schemaOf(field("s", arrow.BinaryTypes.String, true)), `[{"s":"-nan"}]`, "cannot read back"},
		{"+nan", schemaOf(field("s", arrow.BinaryTypes.String, true)), `[{"s":"+nan"}]`, "cannot read back"},
		{"nan inf 1e300", schemaOf(field("s", arrow.BinaryTypes.String, true)), `[{"s":"nan"},{"s":"-inf"},{"s":"1e300"}]`, ""},
		{"00.5", schemaOf(field("s", arrow.BinaryTypes.String, true)), `[{"s":"00.5"}]`, "another number"},
		{"1e-400", schemaOf(field("s", arrow.BinaryTypes.String, true)), `[{"s":"1e-400"}]`, "another number"},
		{"0.5 0e0", schemaOf(field("s", arrow.BinaryTypes.String, true)), `[{"s":"0.5"},{"s":"0e0"}]`, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := batch(t, mem, c.sc, c.rows)
			defer rec.Release()
			err := CheckCSVValues(rec, nil)
			if c.want == "" && err != nil || c.want != "" && (err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want)) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
		})
	}
	noCols := array.NewRecordBatch(arrow.NewSchema(nil, nil), nil, 3)
	defer noCols.Release()
	if err := CheckCSVValues(noCols, nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("3 rows without columns: %v", err)
	}
	// In a column the files already make text, any string reads back as
	// written but the empty one and a carriage return (s07: "05" was
	// refused as a number).
	sc := schemaOf(field("s", arrow.BinaryTypes.String, true))
	for v, ok := range map[string]bool{`"05"`: true, `"-0"`: true, `"1e400"`: true, `"-nan"`: true, `""`: false, `"a\rb"`: false} {
		rec := batch(t, mem, sc, `[{"s":`+v+`}]`)
		err := CheckCSVValues(rec, []string{"s"})
		rec.Release()
		if ok != (err == nil) {
			t.Errorf("%s in a text column: %v", v, err)
		}
		// A column whose type the files have not decided refuses them all.
		rec = batch(t, mem, sc, `[{"s":`+v+`}]`)
		err = CheckCSVValues(rec, nil)
		rec.Release()
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s in a column of no type yet: %v", v, err)
		}
	}
}

// A fixed_size_list of size 0, at any depth, is refused by its schema
// (red team round 18's s06: arrow-go v18.9 wrote a non-null [] as a file
// no reader decodes).
func TestFixedSizeListOfSizeZeroRefused(t *testing.T) {
	for _, dt := range []arrow.DataType{
		arrow.FixedSizeListOf(0, arrow.PrimitiveTypes.Int32),
		arrow.StructOf(field("a", arrow.FixedSizeListOf(0, arrow.PrimitiveTypes.Int32), true)),
		arrow.ListOf(arrow.FixedSizeListOf(0, arrow.PrimitiveTypes.Int32)),
		arrow.FixedSizeListOf(2, arrow.FixedSizeListOf(0, arrow.PrimitiveTypes.Int32)),
	} {
		_, err := NewFileWriter(io.Discard, schemaOf(field("v", dt, true)), WriterOptions{})
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "size 0") {
			t.Fatalf("%s: %v", dt, err)
		}
	}
	if _, err := NewFileWriter(io.Discard, schemaOf(field("v", arrow.FixedSizeListOf(1, arrow.PrimitiveTypes.Int32), true)), WriterOptions{}); err != nil {
		t.Fatal(err)
	}
}
