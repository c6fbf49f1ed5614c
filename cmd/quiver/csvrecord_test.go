package main

import (
	"bytes"
	stdcsv "encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
)

// csvResult is what a CSV reader made of a text: its records, the line
// each field starts on, and its error (nil at the end of the text).
type csvResult struct {
	recs  [][]string
	lines [][]int
	err   error
}

func readStd(text string) csvResult {
	cr := stdcsv.NewReader(strings.NewReader(text))
	var res csvResult
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return res
		}
		if err != nil {
			res.err = err
			return res
		}
		lines := make([]int, len(rec))
		for i := range rec {
			lines[i], _ = cr.FieldPos(i)
		}
		res.recs, res.lines = append(res.recs, rec), append(res.lines, lines)
	}
}

// readOwn reads text with csvRecords, leaving out the null rows that
// blank lines are in a one-column file (one unquoted empty field, which
// only a blank line gives), which encoding/csv skips.
func readOwn(text string, max int) csvResult {
	r := newCSVRecords(strings.NewReader(text), max)
	var res csvResult
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			return res
		}
		if err != nil {
			res.err = err
			return res
		}
		if len(rec) == 1 && rec[0] == "" && !r.Quoted(0) {
			continue
		}
		lines := make([]int, len(rec))
		for i := range rec {
			lines[i] = r.FieldLine(i)
		}
		res.recs, res.lines = append(res.recs, slices.Clone(rec)), append(res.lines, lines)
	}
}

// sameCSV explains how csvRecords' result differs from encoding/csv's.
func sameCSV(std, own csvResult) error {
	if fmt.Sprint(std.recs) != fmt.Sprint(own.recs) || len(std.recs) != len(own.recs) {
		return fmt.Errorf("records %q, encoding/csv %q", own.recs, std.recs)
	}
	for i := range std.recs {
		if !slices.Equal(std.recs[i], own.recs[i]) || !slices.Equal(std.lines[i], own.lines[i]) {
			return fmt.Errorf("record %d: %q on lines %v, encoding/csv %q on lines %v", i, own.recs[i], own.lines[i], std.recs[i], std.lines[i])
		}
	}
	if (std.err == nil) != (own.err == nil) {
		return fmt.Errorf("error %v, encoding/csv %v", own.err, std.err)
	}
	if std.err == nil {
		return nil
	}
	var pe *stdcsv.ParseError
	var se *csvSyntaxError
	if !errors.As(std.err, &pe) || !errors.As(own.err, &se) {
		return fmt.Errorf("error %v, encoding/csv %v", own.err, std.err)
	}
	if !errors.Is(se.Err, pe.Err) || se.StartLine != pe.StartLine || se.Line != pe.Line || se.Column != pe.Column {
		return fmt.Errorf("error %+v (%v), encoding/csv %+v (%v)", *se, se, *pe, pe)
	}
	return nil
}

// On text without CR, csvRecords reads what encoding/csv reads: the same
// records, field lines and errors.
func TestCSVRecordsAsEncodingCSV(t *testing.T) {
	for _, text := range []string{
		"", "\n", "a", "a\n", "a,b\n1,2\n", "a,b\n\n\n1,2", "\"a\"", "\"a\"\"b\",c\n", "\"a\nb\",c\nd,e\n",
		"a,\"b\n\nc\"\n1,2\n", ",\n,\n", "\"\"\n", "a\"b\n", "\"a\"b\n", "\"a\n", "\"a\nb\nc", "a,b\n1\n",
		"a,b\n1,2,3\n", "a\n\"\n\"\n", "a,\"\n", "x,\"y\"\n", "\"a\",\n", strings.Repeat("x", 70000) + "\n1\n",
		"\"" + strings.Repeat("y\n", 40000) + "\"\nz\n", "a,b\n1,\"2\"3\n", "a\n\n1\n\n", "\n\na\n\n\"\"\n\n",
	} {
		if err := sameCSV(readStd(text), readOwn(text, 1<<30)); err != nil {
			t.Errorf("%.60q: %v", text, err)
		}
	}
}

func FuzzCSVRecordsAsEncodingCSV(f *testing.F) {
	for _, s := range []string{"a,b\n1,2\n", "\"a\nb\",\"c\"\"d\"\n", "a\"b", "\"a\"b", "\"a", "a,b\n1\n", "\n\na\n", "a\n\n\"\"\n\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		if strings.Contains(text, "\r") {
			return // where encoding/csv differs, as it should
		}
		for _, bufSize := range []int{1 << 30, 8} {
			own := readOwn(text, bufSize)
			if bufSize < 1<<30 {
				// A small limit: the records before a too-long one are
				// encoding/csv's.
				var se *csvSyntaxError
				if errors.As(own.err, &se) && errors.Is(se.Err, errTooLong) {
					std := readStd(text)
					if len(std.recs) < len(own.recs) || fmt.Sprint(std.recs[:len(own.recs)]) != fmt.Sprint(own.recs) {
						t.Fatalf("%q: records %q before a too-long one, encoding/csv %q", text, own.recs, std.recs)
					}
					continue
				}
			}
			if err := sameCSV(readStd(text), own); err != nil {
				t.Fatalf("%q (limit %d): %v", text, bufSize, err)
			}
		}
	})
}

// The line ends csvRecords knows, and what it keeps in a quoted field.
func TestCSVRecordsLineEnds(t *testing.T) {
	for _, c := range []struct {
		text  string
		want  string // the records, as fmt prints [][]string
		lines string // the line each record's first field starts on
	}{
		{"a,b\r1,2\r", "[[a b] [1 2]]", "[1 2]"},
		{"a,b\r\n1,2\r\n", "[[a b] [1 2]]", "[1 2]"},
		{"a,b\r\r\n\n1,2", "[[a b] [1 2]]", "[1 4]"},
		{"\"a\r\nb\",\"c\rd\"\re,f\r", "[[a\r\nb c\rd] [e f]]", "[1 4]"},
		{"\"a\r", "", ""}, // unclosed
		{"\"\r\n\",x\n", "[[\r\n x]]", "[1]"},
		{"a\r\"b\"\r\n", "[[a] [b]]", "[1 2]"},
	} {
		res := readOwn(c.text, 1<<20)
		if c.want == "" {
			if res.err == nil {
				t.Errorf("%q: read as %q, want an error", c.text, res.recs)
			}
			continue
		}
		var first []int
		for _, l := range res.lines {
			first = append(first, l[0])
		}
		if res.err != nil || fmt.Sprintf("%q", res.recs) != fmt.Sprintf("%q", mustRecords(c.want)) || fmt.Sprint(first) != c.lines {
			t.Errorf("%q: %q on lines %v, error %v; want %s on lines %s", c.text, res.recs, first, res.err, c.want, c.lines)
		}
	}
}

// mustRecords parses fmt's [[a b] [c]] back (fields without spaces).
func mustRecords(s string) [][]string {
	var out [][]string
	for _, r := range strings.Split(strings.TrimSuffix(strings.TrimPrefix(s, "[["), "]]"), "] [") {
		out = append(out, strings.Split(r, " "))
	}
	return out
}

// benchCSV is about 20 MB of CSV: numbers, text, quoted fields with commas
// and quotes, one with a line end in 100.
func benchCSV() []byte {
	var b bytes.Buffer
	b.WriteString("id,name,amount,note\n")
	for i := 0; b.Len() < 20<<20; i++ {
		note := "plain"
		switch i % 100 {
		case 0:
			note = "\"two\nlines\""
		case 1, 2, 3:
			note = "\"with, comma and \"\"quotes\"\"\""
		}
		fmt.Fprintf(&b, "%d,customer %d,%d.%02d,%s\n", i, i%997, i%10000, i%100, note)
	}
	return b.Bytes()
}

// csvRecords must not be much slower than encoding/csv.
func BenchmarkCSVRecords(b *testing.B) {
	data := benchCSV()
	b.Run("encoding-csv", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			cr := stdcsv.NewReader(bytes.NewReader(data))
			cr.ReuseRecord = true
			for {
				if _, err := cr.Read(); err != nil {
					break
				}
			}
		}
	})
	b.Run("csvRecords", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			r := newCSVRecords(bytes.NewReader(data), maxRecordBytes)
			for {
				if _, err := r.Read(); err != nil {
					break
				}
			}
		}
	})
}
