package main

// Reading CSV and NDJSON values as a profile's types (textconv.go, red
// team round 13's e05), one type and value at a time, and what an
// attacker would try on it.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiverdb/quiver/store/codec"
)

// readAs reads body, written to a file called name, as quiver put appends
// it to the profile t/p of schema sc, and returns each column's values in
// JSON (valuesJSON), or the error.
func readAs(t *testing.T, name, body string, sc *arrow.Schema) (map[string][]string, *arrow.Schema, error) {
	t.Helper()
	p := write(t, name, body)
	format, err := inputFormat(p, "")
	if err != nil {
		t.Fatal(err)
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	in, err := openInputAs(t.Context(), p, format, mem, nil, &profileTypes{name: "t/p", schema: sc})
	if err != nil {
		return nil, nil, err
	}
	defer in.Close()
	out := map[string][]string{}
	for in.rdr.Next() {
		rec := in.rdr.RecordBatch()
		if !rec.Schema().Equal(in.rdr.Schema()) {
			t.Fatalf("a batch of schema %s, the reader's %s", rec.Schema(), in.rdr.Schema())
		}
		for j, f := range rec.Schema().Fields() {
			out[f.Name] = append(out[f.Name], valuesJSON(t, rec.Column(j))...)
		}
	}
	return out, in.rdr.Schema(), in.rdr.Err()
}

// valuesJSON is each value of a as JSON (jsonFormat; dictionaries
// decoded), timestamps and times as their raw numbers.
func valuesJSON(t *testing.T, a arrow.Array) []string {
	t.Helper()
	if dt, ok := csvType(a.DataType()); ok && !arrow.TypeEqual(dt, a.DataType()) {
		dense, err := codec.ConformArray(compute.WithAllocator(context.Background(), memory.DefaultAllocator), a, dt)
		if err != nil {
			t.Fatal(err)
		}
		defer dense.Release()
		return valuesJSON(t, dense)
	}
	out := make([]string, a.Len())
	var f func([]byte, int) []byte
	switch a := a.(type) {
	case *array.Timestamp:
		f = func(dst []byte, i int) []byte { return strconv.AppendInt(dst, int64(a.Value(i)), 10) }
	case *array.Time32:
		f = func(dst []byte, i int) []byte { return strconv.AppendInt(dst, int64(a.Value(i)), 10) }
	case *array.Time64:
		f = func(dst []byte, i int) []byte { return strconv.AppendInt(dst, int64(a.Value(i)), 10) }
	case *array.Decimal32:
		f = func(dst []byte, i int) []byte { return append(dst, a.ValueStr(i)...) }
	case *array.Decimal64:
		f = func(dst []byte, i int) []byte { return append(dst, a.ValueStr(i)...) }
	case *array.StringView:
		f = func(dst []byte, i int) []byte { return appendJSONString(dst, []byte(a.Value(i))) }
	case *array.Struct, *array.Duration:
		f = func(dst []byte, i int) []byte { return append(dst, "null"...) }
	default:
		var err error
		if f, err = jsonFormat(a); err != nil {
			t.Fatal(err)
		}
	}
	for i := range out {
		if a.IsNull(i) {
			out[i] = "null"
			continue
		}
		out[i] = string(f(nil, i))
	}
	return out
}

// textCase is one value of one type: its CSV text and its JSON in NDJSON
// ("-": not tried), and the JSON of what is read, or "error:" and a part
// of the error.
type textCase struct {
	typ        arrow.DataType
	csv, json  string
	want       string
	notNull    bool // the column is not nullable
	ndjsonWant string
}

func tsType(u arrow.TimeUnit, tz string) arrow.DataType {
	return &arrow.TimestampType{Unit: u, TimeZone: tz}
}

var (
	i64     = arrow.PrimitiveTypes.Int64
	f64     = arrow.PrimitiveTypes.Float64
	str     = arrow.BinaryTypes.String
	dec     = &arrow.Decimal128Type{Precision: 5, Scale: 2}
	dictStr = &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: str}
)

var textCases = []textCase{
	// bool: true/false in any case, as inferred; not 1, yes, t
	{typ: arrow.FixedWidthTypes.Boolean, csv: "TRUE", json: "true", want: "true"},
	{typ: arrow.FixedWidthTypes.Boolean, csv: "1", json: "1", want: "error:not true or false", ndjsonWant: "error:a number where true or false should be"},
	{typ: arrow.FixedWidthTypes.Boolean, csv: "-", json: `"true"`, want: "error:a string where true or false should be"},
	// integers: in range, no fraction or exponent, nothing rounded
	{typ: arrow.PrimitiveTypes.Int8, csv: "-128", json: "-128", want: "-128"},
	{typ: arrow.PrimitiveTypes.Int8, csv: "128", json: "128", want: "error:beyond the range of int8"},
	{typ: arrow.PrimitiveTypes.Int16, csv: "+007", json: "-", want: "7"},
	{typ: arrow.PrimitiveTypes.Int32, csv: "1.0", json: "1.0", want: "error:not an integer (a fraction"},
	{typ: i64, csv: "1e3", json: "1e3", want: "error:not an integer (a fraction"},
	{typ: i64, csv: " 5", json: `"5"`, want: "error:not an integer", ndjsonWant: "error:a string where an integer should be"},
	{typ: i64, csv: "9223372036854775807", json: "9223372036854775807", want: "9223372036854775807"},
	{typ: i64, csv: "-9223372036854775809", json: "-9223372036854775809", want: "error:beyond the range of int64"},
	{typ: arrow.PrimitiveTypes.Uint8, csv: "255", json: "255", want: "255"},
	{typ: arrow.PrimitiveTypes.Uint8, csv: "-1", json: "-1", want: "error:beyond the range of uint8"},
	{typ: arrow.PrimitiveTypes.Uint16, csv: "-0", json: "-0", want: "0"},
	{typ: arrow.PrimitiveTypes.Uint64, csv: "18446744073709551615", json: "18446744073709551615", want: "18446744073709551615"},
	{typ: arrow.PrimitiveTypes.Uint64, csv: "18446744073709551616", json: "-", want: "error:beyond the range of uint64"},
	// floats: integers are floats; the infinity and NaN spellings of the
	// inference in CSV (NDJSON is strict JSON); nothing made infinite
	{typ: f64, csv: "2", json: "2", want: "2"},
	{typ: f64, csv: "-0", json: "-0", want: "-0"},
	{typ: f64, csv: "2.5e3", json: "2.5e3", want: "2500"},
	{typ: f64, csv: "+Inf", json: "Infinity", want: "Infinity", ndjsonWant: "error:invalid JSON"},
	{typ: f64, csv: "-nan", json: "-", want: "NaN"},
	{typ: f64, csv: "1e400", json: "1e400", want: "error:beyond the range of float64"},
	{typ: f64, csv: "0x10", json: `"1"`, want: "error:not a number", ndjsonWant: "error:a string where a number should be"},
	{typ: f64, csv: "1,5", json: "-", want: "error:not a number"},
	{typ: arrow.PrimitiveTypes.Float32, csv: "0.5", json: "0.5", want: "0.5"},
	{typ: arrow.PrimitiveTypes.Float32, csv: "3.5e38", json: "3.5e38", want: "error:beyond the range of float32"},
	{typ: arrow.FixedWidthTypes.Float16, csv: "65504", json: "65504", want: "65504"},
	{typ: arrow.FixedWidthTypes.Float16, csv: "70000", json: "70000", want: "error:beyond the range of float16"},
	// decimals: exact, or refused; numbers or strings in JSON
	{typ: dec, csv: "1.5", json: "1.5", want: "1.50"},
	{typ: dec, csv: "-0.00", json: `"-0.00"`, want: "0.00"},
	{typ: dec, csv: ".5", json: "-", want: "0.50"},
	{typ: dec, csv: "5.", json: "-", want: "5.00"},
	{typ: dec, csv: "1.5e2", json: "1.5e2", want: "150.00"},
	{typ: dec, csv: "125E-2", json: "-", want: "1.25"},
	{typ: dec, csv: "999.99", json: "999.99", want: "999.99"},
	{typ: dec, csv: "1.505", json: "1.505", want: "error:more decimal places than the scale 2 (it would be rounded)"},
	{typ: dec, csv: "1.500000", json: "-", want: "1.50"},
	{typ: dec, csv: "1000", json: "1000", want: "error:more digits than the precision 5"},
	{typ: dec, csv: "1e999999999", json: "-", want: "error:an exponent beyond the precision 5"},
	{typ: dec, csv: "0e999999999", json: "-", want: "error:an exponent beyond"},
	{typ: dec, csv: "1.2.3", json: `"1,5"`, want: "error:not a decimal number"},
	{typ: dec, csv: "NaN", json: "-", want: "error:not a decimal number"},
	{typ: &arrow.Decimal128Type{Precision: 5, Scale: -2}, csv: "12300", json: "12300", want: "12300"},
	{typ: &arrow.Decimal128Type{Precision: 5, Scale: -2}, csv: "12345", json: "-", want: "error:more decimal places than the scale -2"},
	{typ: &arrow.Decimal256Type{Precision: 40, Scale: 2}, csv: "-12345678901234567890123456789012345678.99", json: "-",
		want: "-12345678901234567890123456789012345678.99"},
	{typ: &arrow.Decimal32Type{Precision: 9, Scale: 3}, csv: "-999999.999", json: "-", want: "-999999.999"},
	{typ: &arrow.Decimal64Type{Precision: 18, Scale: 0}, csv: "999999999999999999", json: "-", want: "999999999999999999"},
	// strings, binary
	{typ: str, csv: "a,\"b\"\nc", json: `"a,\"b\"\nc"`, want: `"a,\"b\"\nc"`},
	{typ: str, csv: "\xff", json: "-", want: "error:not valid UTF-8"},
	{typ: str, csv: "-", json: "5", want: "error:a number where a string should be"},
	{typ: arrow.BinaryTypes.LargeString, csv: "ü", json: `"ü"`, want: `"ü"`},
	{typ: arrow.BinaryTypes.StringView, csv: "x", json: `"x"`, want: `"x"`},
	{typ: arrow.BinaryTypes.Binary, csv: "AP8=", json: `"AP8="`, want: `"AP8="`},
	{typ: arrow.BinaryTypes.Binary, csv: "AP8", json: `"AP8"`, want: "error:not base64"},
	{typ: arrow.BinaryTypes.Binary, csv: "AP\n8=", json: `"AP\n8="`, want: "error:not base64 (a line end in it)"},
	{typ: &arrow.FixedSizeBinaryType{ByteWidth: 2}, csv: "AP8=", json: `"AP8="`, want: `"AP8="`},
	{typ: &arrow.FixedSizeBinaryType{ByteWidth: 2}, csv: "AA==", json: "-", want: "error:1 bytes, but the type's values hold 2"},
	// dates: 2006-01-02, also the years quiver get writes outside 0…9999
	{typ: arrow.FixedWidthTypes.Date32, csv: "2024-02-29", json: `"2024-02-29"`, want: `"2024-02-29"`},
	{typ: arrow.FixedWidthTypes.Date32, csv: "2023-02-29", json: "-", want: "error:not a valid date"},
	{typ: arrow.FixedWidthTypes.Date32, csv: "2024-1-01", json: "-", want: "error:not a date (2006-01-02)"},
	{typ: arrow.FixedWidthTypes.Date32, csv: "-0001-01-02", json: "-", want: `"-0001-01-02"`},
	{typ: arrow.FixedWidthTypes.Date32, csv: "12345-01-02", json: "-", want: `"12345-01-02"`},
	{typ: arrow.FixedWidthTypes.Date32, csv: "-", json: "19000", want: "error:a number where a string of a date"},
	{typ: arrow.FixedWidthTypes.Date64, csv: "1970-01-02", json: `"1970-01-02"`, want: `"1970-01-02"`},
	// timestamps: the unit's precision, wall-clock or instants
	{typ: tsType(arrow.Microsecond, ""), csv: "2024-01-31 12:00:00.123456", json: `"2024-01-31T12:00:00.123456"`, want: "1706702400123456"},
	{typ: tsType(arrow.Microsecond, ""), csv: "2024-01-31", json: "-", want: "1706659200000000"},
	{typ: tsType(arrow.Microsecond, ""), csv: "2024-01-31 12:00", json: "-", want: "1706702400000000"},
	{typ: tsType(arrow.Microsecond, ""), csv: "2024-01-31 12:00:00.1234567", json: "-", want: "error:finer than the unit of timestamp[us] (it would be cut)"},
	{typ: tsType(arrow.Microsecond, ""), csv: "2024-01-31 12:00:00Z", json: "-", want: "error:has a UTC offset, but timestamp[us] has no time zone"},
	{typ: tsType(arrow.Microsecond, ""), csv: "2024-01-31 24:00:00", json: "-", want: "error:not a valid time of day"},
	{typ: tsType(arrow.Microsecond, ""), csv: "2024-01-31 12:00:00 PM", json: "-", want: "error:is no UTC offset"},
	{typ: tsType(arrow.Second, ""), csv: "1706702400", json: "1706702400", want: "error:a bare number, not a timestamp",
		ndjsonWant: "error:a number where a string of a timestamp"},
	{typ: tsType(arrow.Second, ""), csv: "300000000000", json: "-", want: "300000000000"}, // year 11476: get writes the number
	{typ: tsType(arrow.Nanosecond, ""), csv: "2300-01-01", json: "-", want: "error:beyond the range of timestamp[ns]"},
	{typ: tsType(arrow.Nanosecond, ""), csv: "1969-12-31 23:59:59.999999999", json: "-", want: "-1"},
	{typ: tsType(arrow.Second, "Europe/Paris"), csv: "2024-01-31 13:00:00+01:00", json: `"2024-01-31 12:00:00Z"`, want: "1706702400"},
	{typ: tsType(arrow.Second, "Europe/Paris"), csv: "2024-01-31 13:00:00+0100", json: "-", want: "1706702400"},
	{typ: tsType(arrow.Second, "Europe/Paris"), csv: "2024-01-31 13:00:00", json: "-",
		want: "error:has no UTC offset, and in the time zone Europe/Paris of timestamp[s, tz=Europe/Paris] a wall-clock time may be either of two instants"},
	{typ: tsType(arrow.Second, "UTC"), csv: "2024-01-31 12:00:00", json: "-", want: "1706702400"},
	{typ: tsType(arrow.Second, "+05:30"), csv: "2024-01-31 17:30:00", json: "-", want: "1706702400"},
	{typ: tsType(arrow.Second, "+05:30"), csv: "2024-01-31 12:00:00-00:00", json: "-", want: "1706702400"},
	{typ: tsType(arrow.Second, "UTC"), csv: "2024-01-31 12:00:00+24:00", json: "-", want: "error:is no UTC offset"},
	// times of day
	{typ: arrow.FixedWidthTypes.Time32s, csv: "12:34:56", json: `"12:34:56"`, want: "45296"},
	{typ: arrow.FixedWidthTypes.Time32ms, csv: "00:00:00.5", json: "-", want: "500"},
	{typ: arrow.FixedWidthTypes.Time32s, csv: "00:00:00.5", json: "-", want: "error:finer than the unit of time32[s]"},
	{typ: arrow.FixedWidthTypes.Time64ns, csv: "23:59:59.999999999", json: "-", want: "86399999999999"},
	{typ: arrow.FixedWidthTypes.Time64us, csv: "12:00:00Z", json: "-", want: "error:not a time of day"},
	// dictionaries read as their values
	{typ: dictStr, csv: "eu", json: `"eu"`, want: `"eu"`},
	{typ: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: f64}, csv: "1", json: "1", want: "1"},
	{typ: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.LargeString}, csv: "x", json: `"x"`, want: `"x"`},
	// lists: JSON arrays, as get writes them
	{typ: arrow.ListOf(i64), csv: "[1,null,3]", json: "[1,null,3]", want: "[1,null,3]"},
	{typ: arrow.ListOf(i64), csv: "[]", json: "[]", want: "[]"},
	{typ: arrow.ListOf(i64), csv: "[null]", json: "[null]", want: "[null]"},
	{typ: arrow.ListOf(i64), csv: " [ 1 , 2 ] ", json: "[ 1 , 2 ]", want: "[1,2]"},
	{typ: arrow.ListOf(i64), csv: "{1,2}", json: "-", want: "error:not a JSON array (a list is written as one"},
	{typ: arrow.ListOf(i64), csv: "null", json: "-", want: "error:not a JSON array"},
	{typ: arrow.ListOf(i64), csv: "[1,2", json: "[1,2", want: "error:',' or ']' after an element"},
	{typ: arrow.ListOf(i64), csv: `[1,"a"]`, json: `[1,"a"]`, want: "error:element 2: a string where an integer should be"},
	{typ: arrow.ListOf(i64), csv: "[1.5]", json: "[1.5]", want: "error:element 1: not an integer"},
	{typ: arrow.ListOf(i64), csv: "[[1]]", json: "[[1]]", want: "error:element 1: an array where an integer should be"},
	{typ: arrow.ListOf(i64), csv: "[1] x", json: "-", want: "error:more after the JSON array"},
	{typ: arrow.ListOf(i64), csv: "-", json: "5", want: "error:a number where an array should be"},
	{typ: arrow.ListOf(f64), csv: "[NaN,Infinity,-Infinity,-0,1]", json: "-", want: "[NaN,Infinity,-Infinity,-0,1]"},
	{typ: arrow.ListOf(f64), csv: "-", json: "[NaN]", want: "error:element 1: invalid JSON"},
	{typ: arrow.ListOf(str), csv: `["a","",null,"\u00e9\n"]`, json: `["a","",null,"\u00e9\n"]`, want: `["a","",null,"é\n"]`},
	{typ: arrow.ListOfNonNullable(i64), csv: "[1,null]", json: "[1,null]", want: "error:element 2: null, but the type's elements are not nullable"},
	{typ: arrow.LargeListOf(str), csv: `["x"]`, json: `["x"]`, want: `["x"]`},
	{typ: arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Int32), csv: "[1,null]", json: "[1,null]", want: "[1,null]"},
	{typ: arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Int32), csv: "[1]", json: "[1,2,3]", want: "error:1 elements, but the type's lists hold 2",
		ndjsonWant: "error:3 elements"},
	{typ: arrow.ListOf(arrow.ListOf(arrow.PrimitiveTypes.Int16)), csv: "[[1],[],null]", json: "[[1],[],null]", want: "[[1],[],null]"},
	{typ: arrow.ListOf(tsType(arrow.Millisecond, "")), csv: `["2020-01-01 00:00:00"]`, json: "-", want: `["2020-01-01 00:00:00"]`},
	{typ: arrow.ListOf(dec), csv: `[1.50,"2.25",null]`, json: `[1.50,"2.25"]`, want: "[1.50,2.25,null]", ndjsonWant: "[1.50,2.25]"},
	{typ: arrow.ListOf(arrow.BinaryTypes.Binary), csv: `["AA==",""]`, json: "-", want: `["AA==",""]`},
	{typ: arrow.ListOf(dictStr), csv: `["a","b","a"]`, json: `["a"]`, want: `["a","b","a"]`, ndjsonWant: `["a"]`},
	{typ: arrow.ListOf(arrow.FixedWidthTypes.Boolean), csv: "[true,false]", json: "[true,false]", want: "[true,false]"},
	{typ: arrow.ListOf(arrow.Null), csv: "[null,null]", json: "[null]", want: "[null,null]", ndjsonWant: "[null]"},
	{typ: arrow.ListOf(arrow.Null), csv: "[1]", json: "-", want: "error:element 1: quiver put reads no value of type null"},
	// types text cannot give: null only
	{typ: arrow.StructOf(arrow.Field{Name: "a", Type: i64, Nullable: true}), csv: "", json: "null", want: "null"},
	{typ: arrow.StructOf(arrow.Field{Name: "a", Type: i64, Nullable: true}), csv: "{}", json: `{"a":1}`,
		want: "error:quiver put reads no value of type struct<a: int64 nullable> from text"},
	{typ: arrow.FixedWidthTypes.Duration_s, csv: "5", json: "5", want: "error:quiver put reads no value of type duration[s]"},
	{typ: arrow.MapOf(str, i64), csv: "x", json: "[]", want: "error:quiver put reads no value of type map"},
	{typ: arrow.Null, csv: "", json: "null", want: "null"},
	// an extension type reads its own text
	{typ: extensions.NewUUIDType(), csv: "0f8fad5b-d9cb-469f-a165-70867728950e", json: `"0f8fad5b-d9cb-469f-a165-70867728950e"`,
		want: `"0f8fad5b-d9cb-469f-a165-70867728950e"`},
	{typ: extensions.NewUUIDType(), csv: "x", json: "-", want: "error:"},
	// null where there is none
	{typ: i64, csv: "", json: "null", want: "null"},
	{typ: i64, notNull: true, csv: "", json: "null", want: "error:is empty, which is null, but the column is not nullable in t/p",
		ndjsonWant: `error:column "c" is null, but it is not nullable in t/p`},
}

// TestTextAsProfileTypes: every value is read as its column's type in the
// profile, from CSV and from NDJSON, or refused with the reason, and the
// error names the line, the column, the value and the type.
func TestTextAsProfileTypes(t *testing.T) {
	for _, c := range textCases {
		sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: i64, Nullable: true}, {Name: "c", Type: c.typ, Nullable: !c.notNull}}, nil)
		check := func(format, body, want string) {
			t.Helper()
			name := fmt.Sprintf("%s %s %q", format, c.typ, body)
			vals, got, err := readAs(t, "a."+format, body, sc)
			if w, ok := strings.CutPrefix(want, "error:"); ok {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("%s: %v %v, want an error with %q", name, vals["c"], err, w)
				} else if !strings.Contains(err.Error(), " line 3: column ") || (!c.notNull && !strings.Contains(err.Error(), c.typ.String()+", its type in t/p")) {
					t.Errorf("%s: the error does not name the line, column and type: %v", name, err)
				}
				return
			}
			if err != nil {
				t.Errorf("%s: %v", name, err)
				return
			}
			if !arrow.TypeEqual(got.Field(1).Type, c.typ) || got.Field(1).Nullable == c.notNull {
				t.Errorf("%s: read as %s", name, got.Field(1))
			}
			if g := strings.Join(vals["c"], "|"); g != "null|"+want {
				t.Errorf("%s: read %s, want %s", name, g, want)
			}
		}
		// Line 2 is a null (or a 0 where null is not a value), line 3 the
		// case's value.
		if c.csv != "-" {
			field := string(appendField(nil, []byte(c.csv), false))
			if c.csv == "" {
				field = ""
			}
			first := "1,"
			if c.notNull {
				first = "1,0"
			}
			check("csv", "id,c\n"+first+"\n2,"+field+"\n", c.want)
		}
		if c.json != "-" {
			want := c.want
			if c.ndjsonWant != "" {
				want = c.ndjsonWant
			}
			first := `{"id":1}`
			if c.notNull {
				first = `{"id":1,"c":0}`
			}
			check("ndjson", first+"\n\n"+`{"id":2,"c":`+c.json+"}\n", want)
		}
	}
}

// TestTypedTextAttacks: what an attacker would try on the typed readers:
// deep nesting, huge values, many columns, keys spelled with escapes, a
// dictionary outgrowing its index type, late values. Each is read or
// refused quickly, naming the line, with nothing leaked (readAs checks
// the allocator).
func TestTypedTextAttacks(t *testing.T) {
	one := func(typ arrow.DataType) *arrow.Schema {
		return arrow.NewSchema([]arrow.Field{{Name: "c", Type: typ, Nullable: true}}, nil)
	}
	deep := strings.Repeat("[", 1<<20) + strings.Repeat("]", 1<<20)
	long := "[" + strings.Repeat("7,", 1<<20) + "7]"
	var many strings.Builder
	for i := range 300 {
		fmt.Fprintf(&many, "v%d\n", i)
	}
	manyCols := make([]arrow.Field, 3000)
	var header, row []string
	for i := range manyCols {
		manyCols[i] = arrow.Field{Name: fmt.Sprintf("c%d", i), Type: f64, Nullable: true}
		header, row = append(header, manyCols[i].Name), append(row, strconv.Itoa(i))
	}
	// the last of 3000 columns is "c", holding 2999
	manyCols[len(manyCols)-1].Name, header[len(header)-1] = "c", "c"
	cases := []struct {
		name, file, body string
		sc               *arrow.Schema
		want             string // the JSON of c's values joined by |, or "error:" and a part of the error
	}{
		{"deep CSV list", "a.csv", "c\n" + string(appendField(nil, []byte(deep), false)) + "\n", one(arrow.ListOf(i64)),
			"error:CSV line 2: column \"c\" holds \"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[…\", which does not fit list<item: int64, nullable>, its type in t/p: element 1: an array where an integer should be"},
		{"deep NDJSON list", "a.ndjson", `{"c":` + deep + "}\n", one(arrow.ListOf(i64)),
			"error:NDJSON line 1: column \"c\" holds [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[…, which does not fit list<item: int64, nullable>, its type in t/p: element 1: an array where an integer should be"},
		{"deep NDJSON new key", "a.ndjson", `{"c":[1],"x":` + deep + "}\n", one(arrow.ListOf(i64)), "error:holds a nested value"},
		{"a million elements", "a.csv", "c\n\"" + long + "\"\n", one(arrow.ListOf(i64)), "error:"}, // checked below
		{"4 MiB of digits", "a.csv", "c\n1" + strings.Repeat("0", 4<<20) + "\n", one(dec), "error:more digits than the precision 5"},
		{"4 MiB of leading zeros", "a.csv", "c\n" + strings.Repeat("0", 4<<20) + "1\n", one(dec), "1.00"},
		{"4 MiB of decimal places", "a.csv", "c\n0." + strings.Repeat("0", 4<<20) + "1\n", one(dec), "error:more decimal places than the scale 2"},
		{"4 MiB of trailing zeros", "a.csv", "c\n1." + strings.Repeat("0", 4<<20) + "\n", one(dec), "1.00"},
		{"an exponent of 4 MiB", "a.csv", "c\n1e" + strings.Repeat("9", 4<<20) + "\n", one(dec), "error:an exponent beyond the precision 5"},
		{"3000 columns", "a.csv", strings.Join(header, ",") + "\n" + strings.Join(row, ",") + "\n", arrow.NewSchema(manyCols, nil), "2999"},
		{"a key spelled with escapes", "a.ndjson", `{"\u0063":1.5}` + "\n", one(f64), "1.5"},
		{"a key given twice, once escaped", "a.ndjson", `{"c":1,"\u0063":2}` + "\n", one(f64), "error:appears twice"},
		{"a BOM before the header", "a.csv", "\xef\xbb\xbfc\n2\n", one(f64), "2"},
		{"an empty column name", "a.csv", "\"\",c\n1,2\n", arrow.NewSchema([]arrow.Field{{Name: "", Type: i64, Nullable: true}, {Name: "c", Type: i64, Nullable: true}}, nil), "2"},
		{"dictionary<int8> of 300 values", "a.csv", "c\n" + many.String(), one(dictStr), "error:column \"c\""},
		{"a late misfit in CSV", "a.csv", "c\n" + strings.Repeat("1\n", 1500) + "x\n", one(f64),
			`error:CSV line 1502: column "c" holds "x", which does not fit float64, its type in t/p: not a number`},
		{"a late misfit in NDJSON", "a.ndjson", strings.Repeat(`{"c":1}`+"\n", 1500) + `{"c":"x"}` + "\n", one(f64),
			`error:NDJSON line 1501: column "c" holds "x", which does not fit float64, its type in t/p: a string where a number should be`},
		{"an early misfit in NDJSON", "a.ndjson", `{"c":1}` + "\n" + `{"c":"x"}` + "\n", one(f64),
			`error:NDJSON line 2: column "c" holds "x", which does not fit float64, its type in t/p: a string where a number should be`},
		{"a CSV row of too many fields", "a.csv", "c\n1,2\n", one(f64), "error:CSV line 2: a row with another number of fields"},
		{"a new key that differs from a column in case", "a.ndjson", `{"C":1}` + "\n", one(f64),
			`error:NDJSON line 1: key "C" is not a column of t/p, but "c" is (keys are case-sensitive)`},
		{"a new column of nested values", "a.ndjson", `{"c":1,"x":{"a":1}}` + "\n", one(f64), "error:holds a nested value"},
		{"a late new key", "a.ndjson", strings.Repeat(`{"c":1}`+"\n", 1000) + `{"c":1,"x":2}` + "\n", one(f64),
			`error:NDJSON line 1001: key "x" is not a column: not one of t/p (c), nor one of the keys the first 1000 objects add ()`},
		{"no object", "a.ndjson", "\n\n", one(f64), "error:NDJSON: no objects to take columns from"},
		{"no header", "a.csv", "", one(f64), "error:no CSV header row"},
		{"a header only", "a.csv", "c\n", one(f64), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			vals, _, err := readAs(t, c.file, c.body, c.sc)
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("took %s", d)
			}
			if c.name == "a million elements" {
				if err != nil || len(vals["c"]) != 1 || len(vals["c"][0]) != len(long) {
					t.Fatalf("%v", err)
				}
				return
			}
			if w, ok := strings.CutPrefix(c.want, "error:"); ok {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Fatalf("%v, want an error with %q", err, w)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(vals["c"], "|"); got != c.want {
				t.Fatalf("read %q, want %q", got, c.want)
			}
		})
	}
}

// roundTripTypes are the types FuzzTextRoundTrip reads text as.
var roundTripTypes = []arrow.DataType{
	arrow.FixedWidthTypes.Boolean, arrow.PrimitiveTypes.Int8, i64, arrow.PrimitiveTypes.Uint64,
	arrow.FixedWidthTypes.Float16, arrow.PrimitiveTypes.Float32, f64,
	dec, &arrow.Decimal128Type{Precision: 38, Scale: -3}, &arrow.Decimal256Type{Precision: 40, Scale: 2},
	str, arrow.BinaryTypes.LargeString, arrow.BinaryTypes.Binary, &arrow.FixedSizeBinaryType{ByteWidth: 3},
	arrow.FixedWidthTypes.Date32, arrow.FixedWidthTypes.Date64,
	tsType(arrow.Second, ""), tsType(arrow.Millisecond, "UTC"), tsType(arrow.Microsecond, "Asia/Kolkata"),
	tsType(arrow.Nanosecond, "America/New_York"), tsType(arrow.Second, "-03:30"),
	arrow.ListOf(i64), arrow.ListOf(f64), arrow.ListOf(str), arrow.ListOf(arrow.ListOf(arrow.BinaryTypes.Binary)),
	arrow.FixedSizeListOf(2, arrow.FixedWidthTypes.Date32), arrow.LargeListOf(tsType(arrow.Millisecond, "Europe/Paris")),
	arrow.ListOf(dec), arrow.ListOf(arrow.FixedWidthTypes.Boolean),
}

// FuzzTextRoundTrip: no text makes a typed reader panic, and a value it
// reads is written by quiver get's CSV writer as a text it reads back as
// the same value: get's CSV of a profile appends to it unchanged.
func FuzzTextRoundTrip(f *testing.F) {
	for _, s := range []string{"1", "-0", "1.5", "1e3", "NaN", "-Inf", "true", "AAE=", "2024-02-29", "-0001-01-01",
		"2024-01-31 12:00:00.123456789", "2024-01-31T12:00:00+05:30", "2024-03-10 02:30:00-05:00", "300000000000",
		"[1,null,3]", "[]", "[null]", `["a","",null]`, `[["AA=="],[],null]`, `["2024-01-01","1970-01-01"]`,
		`["2024-10-27 02:30:00+01:00"]`, "[NaN,-Infinity,1e308]", `[1.5,"2.25"]`, "99999999999999999999999999999999999999",
		"0.001", "12345678901234567890123456789012345678.99", "[true,false]", "1.5e-45", "65504"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if v == "" {
			return
		}
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		for _, typ := range roundTripTypes {
			c := newValueConv(typ, true)
			a, err := readText(mem, c, v)
			if err != nil {
				continue
			}
			cell, err := cellFormat(a)
			if err != nil {
				a.Release()
				t.Fatal(err)
			}
			var buf []byte
			text, null := cell(&buf, 0)
			if null || len(text) == 0 { // "" is null to put (a known gap)
				a.Release()
				continue
			}
			again, err := readText(mem, c, string(text))
			if err != nil {
				a.Release()
				t.Fatalf("%s: %q was read, written as %q, which is refused: %v", typ, v, text, err)
			}
			// (String, not array.Equal: NaN is not equal to itself, and
			// -0 equals 0.)
			if a.String() != again.String() {
				t.Errorf("%s: %q was read as %s, written as %q, read back as %s", typ, v, a, text, again)
			}
			a.Release()
			again.Release()
		}
	})
}

// readText reads one value v of c's type.
func readText(mem memory.Allocator, c *valueConv, v string) (arrow.Array, error) {
	b := array.NewBuilder(mem, c.build)
	defer b.Release()
	if err := c.text(b, v); err != nil {
		return nil, err
	}
	return b.NewArray(), nil
}

// TestTypedTextOddTypes: a profile column of a type text has no form for
// (unions, run-end encoded, intervals, structs, maps, list views) takes
// nulls, from an empty CSV field, JSON null or an absent key, and refuses
// any value with a clear error; none makes the reader panic.
func TestTypedTextOddTypes(t *testing.T) {
	for _, typ := range []arrow.DataType{
		arrow.ListViewOf(i64), arrow.LargeListViewOf(i64), arrow.RunEndEncodedOf(arrow.PrimitiveTypes.Int32, str),
		arrow.DenseUnionOf([]arrow.Field{{Name: "a", Type: i64, Nullable: true}}, []arrow.UnionTypeCode{0}),
		arrow.SparseUnionOf([]arrow.Field{{Name: "a", Type: i64, Nullable: true}}, []arrow.UnionTypeCode{0}),
		arrow.FixedWidthTypes.MonthInterval, arrow.FixedWidthTypes.DayTimeInterval, arrow.FixedWidthTypes.MonthDayNanoInterval,
		arrow.StructOf(arrow.Field{Name: "a", Type: i64}), arrow.MapOf(str, i64), arrow.FixedWidthTypes.Duration_ns,
		arrow.ListOf(arrow.StructOf(arrow.Field{Name: "a", Type: i64})),
	} {
		sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: i64, Nullable: true}, {Name: "c", Type: typ, Nullable: true}}, nil)
		for _, in := range []struct{ name, body string }{
			{"a.csv", "id,c\n1,\n"},
			{"a.ndjson", `{"id":1}` + "\n" + `{"id":1,"c":null}` + "\n"},
		} {
			rows, err := readRows(t, in.name, in.body, sc)
			if err != nil || rows != strings.Count(in.body, "\n")-1+strings.Count(in.name, "ndjson") {
				t.Errorf("%s %s: %d rows, %v", typ, in.name, rows, err)
			}
		}
		want := "which does not fit " + typ.String() + ", its type in t/p: "
		if _, err := readRows(t, "a.csv", "id,c\n1,0\n", sc); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", typ, err)
		}
		if _, err := readRows(t, "a.ndjson", `{"c":[{"a":1}]}`+"\n", sc); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", typ, err)
		}
	}
}

// readRows reads body as readAs does and counts the rows.
func readRows(t *testing.T, name, body string, sc *arrow.Schema) (int, error) {
	t.Helper()
	p := write(t, name, body)
	format, err := inputFormat(p, "")
	if err != nil {
		t.Fatal(err)
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	in, err := openInputAs(t.Context(), p, format, mem, nil, &profileTypes{name: "t/p", schema: sc})
	if err != nil {
		return 0, err
	}
	defer in.Close()
	n := 0
	for in.rdr.Next() {
		n += int(in.rdr.RecordBatch().NumRows())
	}
	return n, in.rdr.Err()
}
