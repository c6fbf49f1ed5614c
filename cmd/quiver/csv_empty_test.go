package main

// The empty string and null through `quiver get --format csv` and
// `quiver put` (red team finding f01): get writes "" for the empty string
// and an empty field for null (c04), and a null row of a one-column table
// as a blank line; put read "" as null and skipped blank lines.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestCSVGetPutRoundTrip: get's CSV put back, to a new profile (types
// inferred) and appended to the profile it came from (its types), reads
// back as the same CSV, byte for byte: "" stays the empty string, null
// stays null, also in a one-column table, where a null row is a blank
// line.
func TestCSVGetPutRoundTrip(t *testing.T) {
	str, lstr, bin := arrow.BinaryTypes.String, arrow.BinaryTypes.LargeString, arrow.BinaryTypes.Binary
	f := func(name string, typ arrow.DataType) arrow.Field {
		return arrow.Field{Name: name, Type: typ, Nullable: true}
	}
	cases := []struct {
		name   string
		fields []arrow.Field
		rows   string
		want   string // get's CSV of rows, checked too
	}{
		{"strings", []arrow.Field{f("id", i64), f("s", str), f("l", lstr)},
			`[{"id":1,"s":"","l":null},{"id":2,"s":null,"l":""},{"id":3,"s":"a\"b","l":"x\r\ny"},
			  {"id":4,"s":"\n","l":"\r"},{"id":5,"s":"1","l":" "},{"id":6,"s":"","l":""},{"id":null,"s":null,"l":null}]`,
			"id,s,l\n1,\"\",\n2,,\"\"\n3,\"a\"\"b\",\"x\r\ny\"\n4,\"\n\",\"\r\"\n5,1,\" \"\n6,\"\",\"\"\n,,\n"},
		{"numbers as strings", []arrow.Field{f("s", str), f("n", i64)},
			`[{"s":"1","n":1},{"s":"","n":null},{"s":"2.5","n":2}]`, "s,n\n1,1\n\"\",\n2.5,2\n"},
		{"binary", []arrow.Field{f("id", i64), f("b", bin)},
			`[{"id":1,"b":""},{"id":2,"b":null},{"id":3,"b":"AAE="}]`, "id,b\n1,\"\"\n2,\n3,AAE=\n"},
		{"one string column", []arrow.Field{f("s", str)},
			`[{"s":null},{"s":"a"},{"s":null},{"s":""},{"s":"b"},{"s":null}]`, "s\n\na\n\n\"\"\nb\n\n"},
		{"one int column", []arrow.Field{f("n", i64)},
			`[{"n":1},{"n":null},{"n":null},{"n":2},{"n":null}]`, "n\n1\n\n\n2\n\n"},
		{"one column of nulls", []arrow.Field{f("s", str)}, `[{"s":null},{"s":null}]`, "s\n\n\n"},
		{"one column of empty strings", []arrow.Field{f("s", str)}, `[{"s":""},{"s":""}]`, "s\n\"\"\n\"\"\n"},
	}
	addr, _ := testServer(t)
	srv := "--server=" + addr
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := filepath.Join(t.TempDir(), "src.arrow")
			writeIPC(t, src, arrow.NewSchema(c.fields, nil), c.rows)
			from, inferred := fmt.Sprintf("t/from%d", i), fmt.Sprintf("t/inferred%d", i)
			mustRun(t, "put", srv, "--progress=never", from, src)
			get := func(profile string) string {
				t.Helper()
				out := filepath.Join(t.TempDir(), "out.csv")
				mustRun(t, "get", srv, "--progress=never", profile, "-o", out)
				b, err := os.ReadFile(out)
				if err != nil {
					t.Fatal(err)
				}
				return string(b)
			}
			first := get(from)
			if first != c.want {
				t.Fatalf("get wrote %q, want %q", first, c.want)
			}
			csv := writeCSV(t, "back.csv", first)
			if msg, err := putText(t, addr, inferred, csv); err != nil {
				t.Fatalf("put to a new profile: %s", msg)
			}
			if got := get(inferred); got != first {
				t.Errorf("new profile: get -> put -> get gives\n%q, was\n%q", got, first)
			}
			if msg, err := putText(t, addr, from, csv); err != nil {
				t.Fatalf("append: %s", msg)
			}
			_, rows, _ := strings.Cut(first, "\n")
			if got := get(from); got != first+rows {
				t.Errorf("append: get -> put -> get gives\n%q, want\n%q", got, first+rows)
			}
		})
	}
}

// TestCSVQuotedEmptyField: a quoted empty field is the empty string in a
// string column and no bytes in a binary one, an unquoted one null. In an
// inferred column "" is a string, as polars infers it, so a column with
// one is a string column and a late one in a number column is refused; in
// a profile's column of another type it is null, as pyarrow and DuckDB
// read it (a writer that quotes every field writes null so).
func TestCSVQuotedEmptyField(t *testing.T) {
	t.Run("inferred", func(t *testing.T) {
		for _, c := range []struct{ body, want string }{
			{"a,b\n\"\",\n", "a utf8 [] b utf8 [null]"},
			{"a,b\n\"\",1\n,2\n", "a utf8 [ null] b int64 [1 2]"},
			{"n,f\n1,1.5\n\"\",\"\"\n2,\n", "n utf8 [1  2] f utf8 [1.5  null]"},
			{"b\ntrue\n\"\"\n", "b utf8 [true ]"},
			{"s\n\"\"\n\"\"\n", "s utf8 [ ]"},
		} {
			if g := readDescribed(t, c.body); g != c.want {
				t.Errorf("%q: read %s, want %s", c.body, g, c.want)
			}
		}
		late := "n\n" + strings.Repeat("1\n", inferRows) + "\"\"\n"
		in, err := openInput(t.Context(), write(t, "late.csv", late), "csv", memory.DefaultAllocator, nil)
		if err != nil {
			t.Fatal(err)
		}
		for in.rdr.Next() {
		}
		err = in.rdr.Err()
		in.Close()
		want := fmt.Sprintf(`CSV line %d: column "n" holds "" (quoted: the empty string, where an unquoted empty field is null), which is not an integer within int64`, inferRows+2)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("a late \"\" in an int64 column: %v, want %q", err, want)
		}
	})
	t.Run("profile types", func(t *testing.T) {
		dict := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int16, ValueType: arrow.BinaryTypes.String}
		for _, c := range []struct {
			typ     arrow.DataType
			notNull bool
			want    string // the values of "" then of an empty field; "error:" and a part of the message
		}{
			{arrow.BinaryTypes.String, false, `"" null`},
			{arrow.BinaryTypes.LargeString, false, `"" null`},
			{arrow.BinaryTypes.StringView, false, `"" null`},
			{dict, false, `"" null`},
			{arrow.BinaryTypes.Binary, false, `"" null`},
			{arrow.BinaryTypes.LargeBinary, false, `"" null`},
			{arrow.BinaryTypes.String, true, `error:line 3: column "c" is empty, which is null, but the column is not nullable`},
			{i64, false, "null null"},
			{arrow.PrimitiveTypes.Float64, false, "null null"},
			{arrow.FixedWidthTypes.Boolean, false, "null null"},
			{&arrow.FixedSizeBinaryType{ByteWidth: 2}, false, "null null"},
			{arrow.ListOf(i64), false, "null null"},
			{i64, true, `error:line 2: column "c" is empty, which is null, but the column is not nullable`},
		} {
			sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: i64, Nullable: true}, {Name: "c", Type: c.typ, Nullable: !c.notNull}}, nil)
			vals, _, err := readAs(t, "a.csv", "id,c\n1,\"\"\n2,\n", sc)
			if w, ok := strings.CutPrefix(c.want, "error:"); ok {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("%s not null: %v, want an error with %q", c.typ, err, w)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s: %v", c.typ, err)
			} else if got := strings.Join(vals["c"], " "); got != c.want {
				t.Errorf("%s: read %s, want %s", c.typ, got, c.want)
			}
		}
	})
}

// TestCSVOneColumnBlankLines: after the header of a one-column file, a
// blank line (LF, CRLF, CR) is a null row, as quiver get and pyarrow write
// one, and as polars and DuckDB read it; blank lines before the header,
// and in a file of more columns, are skipped as before.
func TestCSVOneColumnBlankLines(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{"c\n1\n\n2\n\n", "c int64 [1 null 2 null]"},
		{"c\r\n\r\nx\r\n", "c utf8 [null x]"},
		{"c\r\r\"\"\r", "c utf8 [null ]"},
		{"\n\nc\n1\n", "c int64 [1]"},
		{"c\n", "c utf8 []"},
		{"c\n\n", "c utf8 [null]"},
		{"a,b\n\n1,2\n\n\n3,4\n\n", "a int64 [1 3] b int64 [2 4]"},
	} {
		if g := readDescribed(t, c.body); g != c.want {
			t.Errorf("%q: read %s, want %s", c.body, g, c.want)
		}
	}
	sc := arrow.NewSchema([]arrow.Field{{Name: "c", Type: i64}}, nil)
	_, _, err := readAs(t, "a.csv", "c\n1\n\n2\n", sc)
	if want := `CSV line 3: column "c" is empty, which is null, but the column is not nullable in t/p`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a blank line in a non-nullable column: %v, want %q", err, want)
	}
}

// readDescribed reads body as a CSV put does and describes each column:
// name, type and values.
func readDescribed(t *testing.T, body string) string {
	t.Helper()
	sc, cols := readAll(t, write(t, "a.csv", body), "csv")
	var got []string
	for i, fl := range sc.Fields() {
		got = append(got, fmt.Sprintf("%s %s %v", fl.Name, fl.Type, cols[i]))
	}
	return strings.Join(got, " ")
}
