package main

// Tests of red team round 13's CSV and NDJSON input bugs (e01, e02, e04,
// e09), through openInput as quiver put reads a file.

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// readExact reads body, written to a file called name, as quiver put does,
// and returns the column names and the values by column: a string value
// exactly as stored (no control characters replaced), others as
// cellString shows them.
func readExact(t *testing.T, name, body string) (names []string, cols [][]string, err error) {
	t.Helper()
	return readExactFile(t, write(t, name, body))
}

// readExactFile is readExact of the file at p.
func readExactFile(t *testing.T, p string) (names []string, cols [][]string, err error) {
	t.Helper()
	format, err := inputFormat(p, "")
	if err != nil {
		t.Fatal(err)
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	in, err := openInput(t.Context(), p, format, mem, nil)
	if err != nil {
		return nil, nil, err
	}
	defer in.Close()
	names = columnNamesOf(in.rdr.Schema())
	cols = make([][]string, len(names))
	for in.rdr.Next() {
		rec := in.rdr.RecordBatch()
		for c := range cols {
			for i := range int(rec.NumRows()) {
				v := cellString(rec.Column(c), i)
				if s, ok := rec.Column(c).(*array.String); ok && s.IsValid(i) {
					v = s.Value(i)
				}
				cols[c] = append(cols[c], v)
			}
		}
	}
	return names, cols, in.rdr.Err()
}

// e01: a record ends at LF, CRLF or a lone CR (classic Mac), as pyarrow,
// polars and DuckDB read them; a CR-only file was one header row of the
// whole file and 0 rows.
func TestCSVLineEnds(t *testing.T) {
	for _, c := range []struct {
		name, body string
	}{
		{"LF", "id,name\n1,a\n2,b\n"},
		{"CRLF", "id,name\r\n1,a\r\n2,b\r\n"},
		{"CR", "id,name\r1,a\r2,b\r"},
		{"CR without a last line end", "id,name\r1,a\r2,b"},
		{"mixed", "id,name\r\n1,a\r2,b\n"},
		{"CR blank lines", "id,name\r\r1,a\r\r\r2,b\r\r"},
		{"CR quoted", "\"id\",\"name\"\r\"1\",\"a\"\r2,\"b\"\r"},
	} {
		t.Run(c.name, func(t *testing.T) {
			names, cols, err := readExact(t, "a.csv", c.body)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(names, "|") != "id|name" || strings.Join(cols[0], "|") != "1|2" || strings.Join(cols[1], "|") != "a|b" {
				t.Fatalf("columns %q, values %q", names, cols)
			}
		})
	}
}

// e02: the bytes inside a quoted field are stored exactly, its line ends
// too (encoding/csv dropped the CR of a CRLF), whatever the file's own
// line ends; and the lines are counted as before for a later error.
func TestCSVQuotedFieldKeepsItsBytes(t *testing.T) {
	values := []string{"a\r\nb", "a\rb", "a\nb", "a\r\r\nb", "\r\n", "\r", "x\"\r\n\"y", "a,b\r\n"}
	for _, end := range []string{"\n", "\r\n", "\r"} {
		body := "v,n" + end
		for i, v := range values {
			body += `"` + strings.ReplaceAll(v, `"`, `""`) + `",` + string(rune('0'+i)) + end
		}
		_, cols, err := readExact(t, "a.csv", body)
		if err != nil {
			t.Fatalf("line end %q: %v", end, err)
		}
		for i, v := range values {
			if i >= len(cols[0]) || cols[0][i] != v {
				t.Errorf("line end %q: row %d holds %q, want %q", end, i+1, cols[0], v)
			}
		}
	}
	// Lines are counted as encoding/csv counted them: "a\r\nb" is on
	// lines 2 and 3, so the bad value is on line 4.
	_, _, err := readExact(t, "a.csv", "v,n\n\"a\r\nb\",1\nx\n")
	if err == nil || !strings.Contains(err.Error(), "CSV line 4: a row with another number of fields") {
		t.Fatalf("error %v, want CSV line 4", err)
	}
}

// A quote left open, a stray quote or text after a closing quote is
// refused, naming its line.
func TestCSVSyntaxErrorsNameTheLine(t *testing.T) {
	for _, c := range []struct {
		body, want string
	}{
		{"a,b\n1,2\n3,\"4\n5,6\n", `CSV line 3: a quoted field starts in this record and no '"' closes it`},
		{"a,b\n1,2\n3,4\"\n", `CSV line 3, column 4: a '"' in a field that does not start with one`},
		{"a,b\r1,2\r3,\"4\"x\r", `CSV line 3, column 5: a '"' ends a quoted field but more of the field follows`},
		{"a,b\n1,2\n3\n", `CSV line 3: a row with another number of fields than the header's 2 (a, b)`},
		{"a,b\n1,\"x\ny\"\n3\n", `CSV line 4: a row with another number of fields`},
	} {
		_, _, err := readExact(t, "a.csv", c.body)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.body, err, c.want)
		}
	}
}

// e04: one CSV record or NDJSON line longer than maxRecordBytes is
// refused, naming its line and the limit, having held about the limit,
// not the line (which was held several times over, whole).
func TestTextInputLineLimit(t *testing.T) {
	old := maxRecordBytes
	maxRecordBytes = 1 << 20
	t.Cleanup(func() { maxRecordBytes = old })
	big := strings.Repeat("x", 16<<20)
	fits := strings.Repeat("y", 1<<20-20)
	for _, c := range []struct {
		name, body, want string
	}{
		{"a.csv", "a,b\n1,2\n3,\"" + big, "CSV line 3: a record of more than 1 MiB"},
		{"a.csv", "a,b\n1,2\n3,\"" + strings.Repeat("x\n", 8<<20), "CSV line 3: a record of more than 1 MiB"},
		{"a.csv", "a,b\n1,2\n3," + big + "\n", "CSV line 3: a record of more than 1 MiB"},
		{"a.csv", "a,b\r1,2\r3," + big + "\r", "CSV line 3: a record of more than 1 MiB"},
		{"a.csv", "a,b\n" + lines("1,2", 1500) + "3," + big + "\n", "CSV line 1502: a record of more than 1 MiB"},
		{"a.ndjson", "{\"a\":1}\n\n" + big, "NDJSON line 3: longer than 1 MiB"},
		{"a.ndjson", lines("{\"a\":1}", 1500) + "{\"a\":\"" + big + "\"}\n", "NDJSON line 1501: longer than 1 MiB"},
		{"a.csv", "a,b\n1,\"" + fits + "\"\n", ""},
		{"a.ndjson", "{\"a\":\"" + fits + "\"}\n", ""},
	} {
		p := write(t, c.name, c.body)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, cols, err := readExactFile(t, p)
		runtime.ReadMemStats(&after)
		if c.want == "" {
			if err != nil || len(cols[len(cols)-1]) != 1 {
				t.Errorf("%s of %d bytes: %v", c.name, len(c.body), err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %.20q…: error %v, want %q", c.name, c.body, err, c.want)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 {
			t.Errorf("%s %.20q…: %d MiB allocated to refuse a line over 1 MiB", c.name, c.body, alloc>>20)
		}
	}
}

// e09: JSON whitespace is space, tab, LF and CR only; a line with other
// whitespace around its object, or of other whitespace only, is refused,
// not trimmed.
func TestNDJSONOnlyJSONWhitespace(t *testing.T) {
	for _, c := range []struct {
		line, want string
	}{
		{"\u00a0{\"a\":2}", "NDJSON line 2: not a JSON object: U+00A0 at column 1 is whitespace, but not JSON's"},
		{"{\"a\":2}\u3000", "NDJSON line 2: more after the JSON object (NDJSON has one object per line): U+3000 at column 8"},
		{"\u0085{\"a\":2}", "NDJSON line 2: not a JSON object: U+0085"},
		{"{\"a\":2}\u2028", "U+2028"},
		{"\u2029", "NDJSON line 2: not a JSON object: U+2029"},
		{"\f{\"a\":2}", "NDJSON line 2: not a JSON object: U+000C"},
		{"{\"a\":2}\v", "U+000B"},
		{" \t{\"a\":2} \t\r", ""},
		{" \t\r", ""}, // a blank line
	} {
		_, cols, err := readExact(t, "a.ndjson", "{\"a\":1}\n"+c.line+"\n{\"a\":3}\n")
		if c.want == "" {
			if err != nil || len(cols[0]) < 2 {
				t.Errorf("%q: %v, rows %q", c.line, err, cols)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.line, err, c.want)
		}
	}
}

// A read error of the file is not taken for its end.
func TestCSVRecordsReadError(t *testing.T) {
	boom := errors.New("boom")
	r := newCSVRecords(&failReader{data: "a,b\n1,\"x\ny", err: boom}, 1<<20)
	var err error
	for err == nil {
		_, err = r.Read()
	}
	if !errors.Is(err, boom) {
		t.Fatalf("error %v, want the read error", err)
	}
}

// failReader gives data, then err.
type failReader struct {
	data string
	err  error
}

func (f *failReader) Read(p []byte) (int, error) {
	if f.data == "" {
		return 0, f.err
	}
	n := copy(p, f.data)
	f.data = f.data[n:]
	return n, nil
}

// e04: a record over the limit after batches went out fails the put and
// commits nothing, as any refused row does.
func TestLongRecordPutCommitsNothing(t *testing.T) {
	old := maxRecordBytes
	maxRecordBytes = 64 << 10
	t.Cleanup(func() { maxRecordBytes = old })
	addr, dir := testServer(t)
	commits := func(name string) bool { return strings.HasSuffix(name, ".commit.json") || name == "manifest.json" }
	for _, c := range []struct{ name, body, want string }{
		{"deep.csv", "id,s\n" + lines("1,a", 2*batchRows) + "2,\"" + strings.Repeat("x\n", 64<<10),
			fmt.Sprintf("CSV line %d: a record of more than 64 KiB", 2*batchRows+2)},
		{"deep.ndjson", lines(`{"id": 1}`, 2*batchRows) + strings.Repeat("x", 128<<10),
			fmt.Sprintf("NDJSON line %d: longer than 64 KiB", 2*batchRows+1)},
	} {
		p := writeCSV(t, c.name, c.body)
		if _, _, err := run(t, "put", "--server", addr, "--progress=never", "a/b", p); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%s: %v, want %q", c.name, err, c.want)
		}
		if got := dirFiles(t, dir, commits); len(got) != 0 {
			t.Fatalf("%s: commits %v after a refused put", c.name, got)
		}
	}
}
