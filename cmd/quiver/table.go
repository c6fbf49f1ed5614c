package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// textTable prints rows as aligned columns, the way `ls -l` and `docker ps`
// do: a header, then one line per row, columns padded with two spaces.
type textTable struct {
	header []string
	rows   [][]string
	right  map[int]bool
	bold   bool // ANSI bold header (terminals only)
}

func newTextTable(header ...string) *textTable {
	return &textTable{header: header, right: map[int]bool{}}
}

func (t *textTable) rightAlign(cols ...int) {
	for _, c := range cols {
		t.right[c] = true
	}
}

func (t *textTable) row(cells ...string) { t.rows = append(t.rows, cells) }

func (t *textTable) write(w io.Writer, indent string) error {
	widths := make([]int, len(t.header))
	for i, h := range t.header {
		widths[i] = utf8.RuneCountInString(h)
	}
	for _, r := range t.rows {
		for i, c := range r {
			if i < len(widths) {
				widths[i] = max(widths[i], utf8.RuneCountInString(c))
			}
		}
	}
	var b strings.Builder
	line := func(cells []string, bold bool) {
		b.WriteString(indent)
		if bold {
			b.WriteString("\x1b[1m")
		}
		for i, c := range cells {
			if i >= len(widths) {
				break
			}
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			last := i == len(cells)-1 || i == len(widths)-1
			switch {
			case t.right[i]:
				b.WriteString(pad + c)
			case last:
				b.WriteString(c)
			default:
				b.WriteString(c + pad)
			}
			if !last {
				b.WriteString("  ")
			}
		}
		if bold {
			b.WriteString("\x1b[0m")
		}
		b.WriteString("\n")
	}
	line(t.header, t.bold)
	for _, r := range t.rows {
		line(r, false)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// humanBytes is n in binary units: 1.5 KiB, 3.0 MiB.
func humanBytes(n int64) string {
	if n < 1024 {
		return strconv.FormatInt(n, 10) + " B"
	}
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB"}
	v := float64(n) / 1024
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	return fmt.Sprintf("%.1f %s", v, units[i])
}

// groupDigits is n with thousands separators: 1,234,567.
func groupDigits(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// when is a time for a table: UTC to the second, "-" when unknown.
func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// maxCellWidth truncates long values in the dataframe print.
const maxCellWidth = 32

// frame collects the first rows of a read for printing, like a dataframe
// print: column names, types, the rows, and the shape.
type frame struct {
	schema *arrow.Schema
	limit  int
	cells  [][]string
}

func newFrame(schema *arrow.Schema, limit int) *frame {
	return &frame{schema: schema, limit: limit}
}

// full reports whether enough rows are in.
func (f *frame) full() bool { return len(f.cells) >= f.limit }

func (f *frame) add(rec arrow.RecordBatch) {
	for r := 0; r < int(rec.NumRows()) && !f.full(); r++ {
		row := make([]string, rec.NumCols())
		for c := range row {
			row[c] = cellString(rec.Column(c), r)
		}
		f.cells = append(f.cells, row)
	}
}

func cellString(a arrow.Array, i int) string {
	if a.IsNull(i) {
		return "null"
	}
	var s string
	switch a := a.(type) {
	case *array.String:
		s = a.Value(i)
	case *array.LargeString:
		s = a.Value(i)
	case *array.Float64:
		s = strconv.FormatFloat(a.Value(i), 'g', -1, 64)
	case *array.Float32:
		s = strconv.FormatFloat(float64(a.Value(i)), 'g', -1, 32)
	default:
		s = a.ValueStr(i)
	}
	s = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' ' // a value must not move the cursor or colour the terminal
		}
		return r
	}, s)
	if utf8.RuneCountInString(s) > maxCellWidth {
		s = string([]rune(s)[:maxCellWidth-1]) + "…"
	}
	return s
}

func isNumeric(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64,
		arrow.FLOAT16, arrow.FLOAT32, arrow.FLOAT64, arrow.DECIMAL128, arrow.DECIMAL256:
		return true
	}
	return false
}

// write prints the frame; total is the row count of the whole read.
func (f *frame) write(w io.Writer, total int64, color bool) error {
	header := make([]string, f.schema.NumFields())
	types := make([]string, f.schema.NumFields())
	for i, fl := range f.schema.Fields() {
		header[i] = fl.Name
		types[i] = fl.Type.String()
	}
	t := newTextTable(header...)
	t.bold = color
	t.row(types...)
	for i, fl := range f.schema.Fields() {
		if isNumeric(fl.Type) {
			t.rightAlign(i)
		}
	}
	for _, r := range f.cells {
		t.row(r...)
	}
	if err := t.write(w, ""); err != nil {
		return err
	}
	shown := int64(len(f.cells))
	rows := "rows"
	if total == 1 {
		rows = "row"
	}
	msg := fmt.Sprintf("%s %s × %d columns", groupDigits(total), rows, f.schema.NumFields())
	if total < 0 {
		// A filtered read whose count the server could not tell ahead.
		msg = fmt.Sprintf("first %s rows × %d columns (more match the filter; -o FILE to save all)", groupDigits(shown), f.schema.NumFields())
	} else if total > shown {
		msg += fmt.Sprintf(" (first %s shown; -o FILE to save all)", groupDigits(shown))
	}
	if color {
		msg = "\x1b[2m" + msg + "\x1b[0m"
	}
	_, err := fmt.Fprintln(w, msg)
	return err
}
