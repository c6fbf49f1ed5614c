package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc"

	"github.com/quiverdb/quiver/flightserver"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// readInput writes body to a file called name, opens it as its extension
// says and reads it to the end with a checked allocator. It returns the
// schema, the row count and the last row's values (as cellString shows
// them, but unshortened enough for the tests), and the error of opening or
// reading; a panic fails the test.
func readInput(t *testing.T, name, body string) (sc *arrow.Schema, rows int64, last []string, err error) {
	t.Helper()
	p := write(t, name, body)
	format, err := inputFormat(p, "")
	if err != nil {
		t.Fatal(err)
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	in, err := openInput(t.Context(), p, format, mem, nil)
	if err != nil {
		return nil, 0, nil, err
	}
	defer in.Close()
	sc = in.rdr.Schema()
	for in.rdr.Next() {
		rec := in.rdr.RecordBatch()
		rows += rec.NumRows()
		last = last[:0]
		for c := range int(rec.NumCols()) {
			last = append(last, cellString(rec.Column(c), int(rec.NumRows())-1))
		}
	}
	return sc, rows, last, in.rdr.Err()
}

// lines repeats line n times, each ended by a newline.
func lines(line string, n int) string { return strings.Repeat(line+"\n", n) }

// c02: a key that first shows up after the lines the columns were inferred
// from is refused, naming its line and itself, wherever it shows up and
// however it differs from a column; it used to be dropped without a word.
func TestNDJSONLateKeyIsRefused(t *testing.T) {
	w := lines(`{"id": 1, "name": "x"}`, inferRows)
	cases := []struct {
		name, body string
		line       int
		key        string // as the message quotes it
	}{
		{"just after the window", w + `{"id": 2, "amount": "123.45 EUR"}` + "\n", 1001, `"amount"`},
		{"null value", w + `{"id": 2, "amount": null}` + "\n", 1001, `"amount"`},
		{"first key of the line", w + `{"amount": 1, "id": 2}`, 1001, `"amount"`},
		{"in a later batch", w + lines(`{"id": 3}`, batchRows+10) + `{"id": 2, "amount": 5}` + "\n" + lines(`{"id": 3}`, 5),
			1000 + batchRows + 10 + 1, `"amount"`},
		{"differs in case", w + `{"ID": 2}` + "\n", 1001, `"ID"`},
		{"differs in normalisation", lines(`{"caf\u00e9": 1}`, inferRows) + `{"cafe\u0301": 2}` + "\n", 1001, "\"cafe\u0301\" (\"cafe\\u0301\")"},
		{"differs in white space", w + `{"id ": 2}` + "\n", 1001, `"id "`},
		{"escaped like a column, yet another", w + `{"n\u0061me": "y", "nam\u00e9": "z"}` + "\n", 1001, `"namé"`},
		{"after blank and CRLF lines", strings.ReplaceAll(w, "\n", "\r\n") + "\r\n\n  \n" + `{"id": 2, "amount": 1}` + "\r\n", 1004, `"amount"`},
		{"empty key", w + `{"": 1}` + "\n", 1001, `""`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, _, err := readInput(t, "a.ndjson", c.body)
			if err == nil {
				t.Fatal("no error: the key would be dropped")
			}
			if msg := err.Error(); !strings.Contains(msg, fmt.Sprintf("line %d:", c.line)) || !strings.Contains(msg, "key "+c.key) ||
				!strings.Contains(msg, "first 1000") {
				t.Fatalf("%v\nwant line %d, key %s and how to get it in", err, c.line, c.key)
			}
		})
	}
}

// A key at line 1,000,001: no window or batch boundary lets it through.
func TestNDJSONKeyAtLineMillionAndOne(t *testing.T) {
	if testing.Short() {
		t.Skip("a 9 MB file")
	}
	_, _, _, err := readInput(t, "a.ndjson", lines(`{"id": 1}`, 1_000_000)+`{"id": 2, "late": true}`+"\n")
	if err == nil || !strings.Contains(err.Error(), `line 1000001: key "late"`) {
		t.Fatalf("%v", err)
	}
}

// c02 for CSV: a row with more (or fewer) fields than the header is
// refused, after the inference window as within it.
func TestCSVRowWithOtherFieldCountIsRefused(t *testing.T) {
	w := "a,b\n" + lines("1,x", inferRows)
	for _, c := range []struct {
		name, body string
		line       int
	}{
		{"extra field after the window", w + "2,y,extra\n", 1002},
		{"extra empty field after the window", w + "2,y,\n", 1002},
		{"missing field after the window", w + "2\n", 1002},
		{"extra field in a later batch", w + lines("1,x", batchRows) + "2,y,z\n", 1002 + batchRows},
		{"extra field within the window", "a,b\n1,x\n2,y,z\n", 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, _, err := readInput(t, "a.csv", c.body)
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("CSV line %d: ", c.line)) || !strings.Contains(err.Error(), "header") {
				t.Fatalf("%v", err)
			}
		})
	}
}

// refused marks a value a test wants refused.
const refused = "\x00refused"

// c03: a value after the inference window is taken exactly when its kind
// is its column's (or an integer in a float64 column), as within the
// window; everything the window refuses is refused after it, and nothing
// is converted. Within the window a mix of int64 and float64, or a null
// column's first value, widens the column instead: after it, with the
// type fixed, that is refused too.
func TestNDJSONLateValuesAreCheckedAsEarlyOnes(t *testing.T) {
	cases := []struct {
		first, late string
		want        string // the late value as stored, or refused
	}{
		{"true", "1", refused},
		{"true", "0", refused},
		{"true", `"true"`, refused},
		{"true", "false", "false"},
		{"1.5", `"NaN"`, refused},
		{"1.5", `"1.5"`, refused},
		{"1.5", "1", "1"},
		{"1.5", "-0", "-0"},
		{"1.5", "1e-400", "0"},
		{"1.5", "1E2", "100"},
		{"1.5", "1e400", refused},
		{"1.5", "-1e400", refused},
		{"1.5", "123456789012345678901234567890", "1.2345678901234568e+29"},
		{"1", `"1"`, refused},
		{"1", "-0", "0"},
		{"1", "9223372036854775807", "9223372036854775807"},
		{"1", "9223372036854775808", refused},
		{"1", "1.0", refused},
		{"1", "1e0", refused},
		{"1", "true", refused},
		{`"x"`, "1", refused},
		{`"x"`, "true", refused},
		{`"x"`, `""`, ""},
		{`"x"`, `"\u00e9\n"`, "é "},
		{"null", "1", refused},
		{"null", `"y"`, "y"},
		{"1", "null", "null"},
		{"1", `{"b": 1}`, refused},
		{"1", "[1]", refused},
	}
	for _, c := range cases {
		t.Run(c.first+" then "+c.late, func(t *testing.T) {
			early := fmt.Sprintf(`{"a": %s}`+"\n"+`{"a": %s}`+"\n", c.first, c.late)
			late := lines(fmt.Sprintf(`{"a": %s}`, c.first), inferRows) + fmt.Sprintf(`{"a": %s}`+"\n", c.late)
			_, _, earlyLast, earlyErr := readInput(t, "early.ndjson", early)
			sc, rows, last, err := readInput(t, "late.ndjson", late)
			if c.want == refused {
				if err == nil {
					t.Fatalf("stored as %v (%s)", last, sc.Field(0).Type)
				}
				if !strings.Contains(err.Error(), "line 1001: column \"a\"") {
					t.Fatalf("%v: want line 1001 and the column named", err)
				}
				return
			}
			if err != nil || rows != inferRows+1 || last[0] != c.want {
				t.Fatalf("%d rows, last %v, error %v; want %q", rows, last, err, c.want)
			}
			// Taken after the window: taken within it too, as the same value
			// (the window may widen an int64 column to float64).
			if earlyErr != nil || (earlyLast[0] != c.want && c.first != "1" && c.first != "null") {
				t.Fatalf("within the window: %v, %v; after it %q", earlyLast, earlyErr, c.want)
			}
		})
	}
	// Whatever the window refuses, lines after it refuse as well.
	for _, c := range cases {
		early := fmt.Sprintf(`{"a": %s}`+"\n"+`{"a": %s}`+"\n", c.first, c.late)
		if _, _, _, err := readInput(t, "early.ndjson", early); err != nil && c.want != refused {
			t.Errorf("%s then %s: refused within the window (%v), taken after it", c.first, c.late, err)
		}
	}
}

// c03 for CSV: a field after the window is taken only if the inference
// would have kept its column's type with it; nothing is converted (the
// parsers underneath take "+5", "0x10", "1_000" or "1" as other types).
func TestCSVLateValuesAreCheckedAsEarlyOnes(t *testing.T) {
	for _, c := range []struct {
		first, late string
		want        string // the late value as stored, or refused
	}{
		{"1", "1.5", refused},
		{"1", "+5", refused},
		{"1", " 5", refused},
		{"1", "9223372036854775808", refused},
		{"1", "-0", "0"},
		{"1", "007", "7"},
		{"1.5", "1", "1"},
		{"1.5", "0x10", refused},
		{"1.5", "1_000", refused},
		{"1.5", "Inf", "+Inf"}, // e03: as quiver get writes it
		{"1.5", "-Inf", "-Inf"},
		{"1.5", "Infinity", "+Inf"},
		{"1.5", "-INFINITY", "-Inf"},
		{"1.5", "nan", "NaN"},
		{"1.5", "+nan", "NaN"},
		{"1.5", "nan(1)", refused},
		{"1.5", "infin", refused},
		{"1.5", "inf", "+Inf"},
		{"1.5", "-NaN", "NaN"},
		{"1.5", "-0.0", "-0"},
		{"1.5", "1e400", refused},
		{"1.5", "99999999999999999999", "1e+20"},
		{"true", "1", refused},
		{"true", "t", refused},
		{"true", "tRuE", "true"},
		{"x", "1", "1"},
		{"x", "\"a,\r\nb\"", "a,  b"}, // the CR is kept (e02)
		{"1", "\"\"", refused},        // f01: "" is the empty string, which would have made the column a string one
		{"1", "", "null"},
		{"x", "\"\"", ""},
		{"x", "", "null"},
	} {
		t.Run(c.first+" then "+c.late, func(t *testing.T) {
			sc, _, last, err := readInput(t, "a.csv", "a,b\n"+lines(c.first+",x", inferRows)+c.late+",y\n")
			if c.want == refused {
				if err == nil {
					t.Fatalf("stored as %v (%s)", last, sc.Field(0).Type)
				}
				if !strings.Contains(err.Error(), `CSV line 1002: column "a"`) {
					t.Fatalf("%v: want line 1002 and the column named", err)
				}
				return
			}
			if err != nil || last[0] != c.want {
				t.Fatalf("last row %v, error %v; want %q", last, err, c.want)
			}
		})
	}
}

// c09: a value that does not fit names the line, the column, the
// inferred type and the value (shortened), not a Go parser's message.
func TestLateTypeErrorsAreClear(t *testing.T) {
	long := strings.Repeat("é", 10_000)
	for _, c := range []struct {
		name, body string
		want       []string
	}{
		{"csv int", "a,b\n" + lines("1,x", 1000) + "1.5,y\n",
			[]string{`CSV line 1002: column "a" holds "1.5"`, "int64", "first 1000 rows"}},
		{"csv int overflow", "a,b\n" + lines("1,x", 1000) + "9223372036854775808,y\n",
			[]string{`CSV line 1002: column "a" holds "9223372036854775808"`, "int64"}},
		{"csv line after a quoted newline", "a,b\n" + lines("1,\"x\ny\"", 1000) + "z,y\n",
			[]string{`CSV line 2002: column "a" holds "z"`, "int64"}},
		{"csv long value", "a\n" + lines("1", 1000) + long + "\n",
			[]string{`CSV line 1002: column "a" holds "éééé`, `…"`, "int64"}},
		{"csv float out of range in the window", "a\n1.5\n1e400\n",
			[]string{`CSV line 3: column "a" holds "1e400", beyond the range of float64`}},
		{"csv bool", "a\n" + lines("true", 1000) + "yes\n",
			[]string{`CSV line 1002: column "a" holds "yes"`, "bool"}},
		{"csv not UTF-8", "a\nx\n\xff\n", []string{`CSV line 3: column "a" holds "\xff", which is not valid UTF-8`}},
		{"ndjson string in int", lines(`{"a": 1, "b": "x"}`, 1000) + `{"a": "late", "b": "y"}` + "\n",
			[]string{`NDJSON line 1001: column "a" holds the string "late"`, "int64"}},
		{"ndjson out of range", lines(`{"a": 1.5}`, 1000) + `{"a": 1e400}` + "\n",
			[]string{`NDJSON line 1001: column "a" holds 1e400, beyond the range of float64`}},
		{"ndjson duplicate key", `{"a": 1, "a": 2}` + "\n", []string{`NDJSON line 1: key "a" appears twice`}},
		{"ndjson late duplicate key", lines(`{"a": 1}`, 1000) + `{"a": 1, "a": 1}` + "\n", []string{`NDJSON line 1001: key "a" appears twice`}},
		{"ndjson long string", lines(`{"a": 1}`, 1000) + `{"a": "` + long + `"}` + "\n",
			[]string{`NDJSON line 1001: column "a" holds the string "éééé`, `…"`, "int64"}},
		{"ndjson long number", lines(`{"a": 1}`, 1000) + `{"a": 1` + strings.Repeat("0", 10_000) + "}\n",
			[]string{`NDJSON line 1001: column "a" holds the integer 1000`, "beyond int64", "int64"}},
		{"ndjson nested late", lines(`{"a": 1}`, 1000) + `{"a": {"b": 1}}` + "\n",
			[]string{`NDJSON line 1001: column "a" holds a nested value`}},
		{"ndjson two objects on a line", `{"a": 1} {"a": 2}` + "\n", []string{`NDJSON line 1: more after the JSON object`}},
		{"ndjson two objects on a late line", lines(`{"a": 1}`, 1000) + `{"a": 1} {"a": 2}` + "\n",
			[]string{`NDJSON line 1001: more after the JSON object`}},
		{"ndjson late syntax error", lines(`{"a": 1}`, 1000) + `{"a": 1,}` + "\n", []string{`NDJSON line 1001: `}},
		{"ndjson not UTF-8", `{"a": "x"}` + "\n" + "{\"a\": \"\xff\"}\n", []string{`NDJSON line 2: not valid UTF-8`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			name := "a.csv"
			if strings.HasPrefix(c.name, "ndjson") {
				name = "a.ndjson"
			}
			_, _, _, err := readInput(t, name, c.body)
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%s\nlacks %s", msg, w)
				}
			}
			if len(msg) > 600 || strings.Contains(msg, "strconv.") || strings.Contains(msg, "Go value") {
				t.Errorf("%d bytes: %s", len(msg), msg)
			}
		})
	}
}

// c10: a leading UTF-8 byte order mark is not part of the first column's
// name (as pyarrow, polars and DuckDB read it); elsewhere it is data.
func TestInputSkipsByteOrderMark(t *testing.T) {
	const bom = "\ufeff"
	for _, c := range []struct {
		name, body, cols, last string
	}{
		{"a.csv", bom + "id,name\r\n1,a\r\n2,b\r\n", "id, name", "2 b"},
		{"b.csv", bom + "\"id\",name\n1,a\n", "id, name", "1 a"},
		{"c.csv", "id,name\n1," + bom + "a\n", "id, name", "1 " + bom + "a"},
		{"d.csv", bom + bom + "id\n1\n", bom + "id", "1"},
		{"a.ndjson", bom + `{"id": 1, "name": "a"}` + "\r\n", "id, name", "1 a"},
	} {
		sc, _, last, err := readInput(t, c.name, c.body)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got := columnNames(sc); got != c.cols || strings.Join(last, " ") != c.last {
			t.Errorf("%s: columns %q, last row %q; want %q, %q", c.name, got, strings.Join(last, " "), c.cols, c.last)
		}
	}
	for name, body := range map[string]string{"bom-only.csv": bom, "bom-only.ndjson": bom + "\n", "utf16.csv": "\xff\xfei\x00d\x00\n\x00"} {
		if _, _, _, err := readInput(t, name, body); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// countPuts counts the DoPut calls a server gets.
type countPuts struct {
	mu    sync.Mutex
	calls int
}

func (c *countPuts) intercept(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if strings.HasSuffix(info.FullMethod, "/DoPut") {
		c.mu.Lock()
		c.calls++
		c.mu.Unlock()
	}
	return h(srv, ss)
}

func (c *countPuts) n() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

// dirFiles lists the files under dir that match keep.
func dirFiles(t *testing.T, dir string, keep func(name string) bool) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // the server removing a refused put's directories
		}
		if err == nil && !d.IsDir() && keep(d.Name()) {
			out = append(out, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A refused put commits nothing; one refused in its first batch does not
// even open a DoPut, so the data dir does not change at all.
func TestRefusedPutLeavesNothing(t *testing.T) {
	f := &countPuts{}
	addr, dir := testServer(t, flightserver.WithGRPCOptions(grpc.ChainStreamInterceptor(f.intercept)))
	mustRun(t, "put", "--server", addr, "--progress=never", "a/other", writeCSV(t, "ok.csv", "id\n1\n"))
	f.mu.Lock()
	f.calls = 0
	f.mu.Unlock()
	all := func(string) bool { return true }
	before := dirFiles(t, dir, all)

	early := writeCSV(t, "late.ndjson", lines(`{"id": 1}`, inferRows)+`{"id": 2, "amount": 1}`+"\n")
	if _, _, err := run(t, "put", "--server", addr, "--progress=never", "a/b", early); err == nil ||
		!strings.Contains(err.Error(), early+`: NDJSON line 1001: key "amount"`) {
		t.Fatalf("%v", err)
	}
	if f.n() != 0 {
		t.Fatalf("a put refused in its first batch opened %d DoPuts", f.n())
	}
	if after := dirFiles(t, dir, all); !slices.Equal(before, after) {
		t.Fatalf("data dir changed:\n%v\n%v", before, after)
	}

	// Refused after batches went out: the server is told, and commits nothing.
	deep := writeCSV(t, "deep.ndjson", lines(`{"id": 1}`, 2*batchRows)+`{"id": "x"}`+"\n")
	if _, _, err := run(t, "put", "--server", addr, "--progress=never", "a/b", deep); err == nil ||
		!strings.Contains(err.Error(), fmt.Sprintf(`%s: NDJSON line %d: column "id"`, deep, 2*batchRows+1)) {
		t.Fatalf("%v", err)
	}
	// The client does not wait for the server to see a put it cancels.
	for deadline := time.Now().Add(10 * time.Second); f.n() == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if f.n() != 1 {
		t.Fatalf("%d DoPuts, want 1 (the deep file's)", f.n())
	}
	commits := func(name string) bool { return strings.HasSuffix(name, ".commit.json") || name == "manifest.json" }
	if got, want := dirFiles(t, dir, commits), dirFiles(t, filepath.Join(dir, "a", "other"), commits); !slices.Equal(got, want) {
		t.Fatalf("commits %v, want only a/other's %v", got, want)
	}
	if _, _, err := run(t, "get", "--server", addr, "a/b"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("get after refused puts: %v", err)
	}
}

// tokenFields is eachJSONField as encoding/json's Decoder.Token reads a
// line: the reference the scanner is held to.
func tokenFields(line []byte) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("not an object: %v", err)
	}
	var out []string
	seen := map[string]bool{}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key := kt.(string)
		if seen[key] {
			return nil, errors.New("key twice")
		}
		seen[key] = true
		vt, err := dec.Token()
		if err != nil {
			return nil, err
		}
		switch v := vt.(type) {
		case nil:
			out = append(out, key+"=null")
		case bool:
			out = append(out, fmt.Sprintf("%s=bool %v", key, v))
		case string:
			out = append(out, fmt.Sprintf("%s=string %q", key, v))
		case json.Number:
			k := kindFloat
			if _, err := strconv.ParseInt(string(v), 10, 64); err == nil {
				k = kindInt
			}
			out = append(out, fmt.Sprintf("%s=%s %s", key, k, v))
		default:
			return nil, errors.New("nested")
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("more")
	}
	return out, nil
}

// The NDJSON scanner takes a line exactly when encoding/json does (and
// the line is flat, UTF-8 and without a key twice), with the same keys
// and values; it refuses besides only strings with a lone surrogate,
// which encoding/json would change to U+FFFD.
func FuzzNDJSONLine(f *testing.F) {
	for _, s := range []string{
		`{}`, ` { "a" : 1 , "b":-0.5e+3, "c": "x\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00", "d": true, "e": false, "f": null } `,
		`{"a": 01}`, `{"a": 1.}`, `{"a": .5}`, `{"a": -}`, `{"a": 1e}`, `{"a": +1}`, `{"a": 1,}`, `{,}`, `{"a" 1}`,
		`{"a": tru}`, `{"a": nulll}`, `{"a": "\ud800"}`, `{"a": "\udc00\ud800"}`, `{"a": "\ud800\u0041"}`, `{"a": "\x"}`,
		`{"a": "\u12"}`, `{"a": "` + "\t" + `"}`, `{"a": 1} {"b": 2}`, `{"a": 1}x`, `[1]`, `"a"`, `{"a": [1]}`, `{"a": {}}`,
		`{"a": 1, "a": 2}`, `{"\u0061": 1, "a": 2}`, `{"a": 9223372036854775808}`, `{"a": -9223372036854775808}`, `{"a": 1e400}`,
		`{"a": "\`, `{"a`, `{`, ``, "{\"a\": \"\xff\"}", `{"a": "` + "\u2028" + `"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		var got []string
		err := eachJSONField(line, map[string]struct{}{}, func(key string, v jsonValue) error {
			switch v.kind {
			case kindUnknown:
				got = append(got, key+"=null")
			case kindBool:
				got = append(got, fmt.Sprintf("%s=bool %v", key, v.b))
			case kindString:
				got = append(got, fmt.Sprintf("%s=string %q", key, v.text))
			default:
				got = append(got, fmt.Sprintf("%s=%s %s", key, v.kind, v.text))
			}
			return nil
		})
		want, werr := tokenFields(line)
		switch {
		case err == nil && werr != nil:
			t.Fatalf("%q: taken as %v; encoding/json: %v", line, got, werr)
		case err == nil && !slices.Equal(got, want):
			t.Fatalf("%q: %v, encoding/json %v", line, got, want)
		case err != nil && werr == nil && utf8.Valid(line) && !strings.Contains(err.Error(), "surrogate"):
			t.Fatalf("%q: refused (%v); encoding/json takes %v", line, err, want)
		}
	})
}
