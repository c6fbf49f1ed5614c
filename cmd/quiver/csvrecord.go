package main

// The CSV record reader of `quiver put`. encoding/csv cannot be used: it
// drops the CR of a CRLF inside a quoted field (so "a\r\nb" was stored as
// "a\nb", red team round 13, e02) and knows no CR-only line end (a classic
// Mac file became one header row of the whole file, e01), and it holds a
// line of any length (e04).

import (
	"bufio"
	"bytes"
	stdcsv "encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// maxRecordBytes is the most bytes one CSV record or one NDJSON line may
// hold; a longer one is refused (it is most likely an unclosed quote, or a
// file of another format). A variable so that tests can lower it.
var maxRecordBytes = 64 << 20

// errTooLong is readLine's error for a line beyond its budget.
var errTooLong = errors.New("record too long")

// firstChunk and lineChunk are the sizes of the first and the later
// chunks longLine gathers a line in.
const (
	firstChunk = 64 << 10
	lineChunk  = 1 << 20
)

// longLine gathers a line that crosses a reader's buffer in chunks, so
// that growing it copies nothing and leaves no garbage (appending to one
// slice would hold about twice the line, and more until the garbage
// collector runs), and joins them once the line is whole.
type longLine struct {
	chunks [][]byte
	n      int
}

func (l *longLine) add(b []byte) {
	l.n += len(b)
	for len(b) > 0 {
		if len(l.chunks) == 0 {
			l.chunks = append(l.chunks, make([]byte, 0, firstChunk))
		} else if last := l.chunks[len(l.chunks)-1]; len(last) == cap(last) {
			l.chunks = append(l.chunks, make([]byte, 0, lineChunk))
		}
		last := &l.chunks[len(l.chunks)-1]
		k := min(len(b), cap(*last)-len(*last))
		*last = append(*last, b[:k]...)
		b = b[k:]
	}
}

// join returns the line, in dst's memory if it has room, and resets l.
func (l *longLine) join(dst []byte) []byte {
	dst = slices.Grow(dst[:0], l.n)
	for _, c := range l.chunks {
		dst = append(dst, c...)
	}
	l.reset()
	return dst
}

// string returns the line as a string (one allocation) and resets l.
func (l *longLine) string() string {
	var sb strings.Builder
	sb.Grow(l.n)
	for _, c := range l.chunks {
		sb.Write(c)
	}
	l.reset()
	return sb.String()
}

// reset empties l, keeping its first chunk for the next line.
func (l *longLine) reset() {
	if len(l.chunks) > 0 {
		clear(l.chunks[1:])
		l.chunks = l.chunks[:1]
		l.chunks[0] = l.chunks[0][:0]
	}
	l.n = 0
}

// csvSyntaxError is an error in the CSV text: where the record with it
// starts, where the error is (a column counts bytes from 1), and what it
// is; Err is encoding/csv's ErrQuote, ErrBareQuote or ErrFieldCount, or
// errTooLong.
type csvSyntaxError struct {
	StartLine, Line, Column int
	Err                     error
	unclosed                bool // ErrQuote: no '"' closes the field
	limit                   int  // errTooLong's
}

func (e *csvSyntaxError) Error() string {
	switch {
	case errors.Is(e.Err, stdcsv.ErrBareQuote):
		return fmt.Sprintf(`line %d, column %d: a '"' in a field that does not start with one `+
			`(quote the whole field and double each '"' in it: "a ""b"" c")`, e.Line, e.Column)
	case errors.Is(e.Err, stdcsv.ErrQuote) && e.unclosed:
		return fmt.Sprintf(`line %d: a quoted field starts in this record and no '"' closes it by the end of the file`, e.StartLine)
	case errors.Is(e.Err, stdcsv.ErrQuote):
		return fmt.Sprintf(`line %d, column %d: a '"' ends a quoted field but more of the field follows `+
			`(a '"' inside a quoted field is written "")`, e.Line, e.Column)
	case errors.Is(e.Err, stdcsv.ErrFieldCount):
		return fmt.Sprintf("line %d: a record with another number of fields than the first", e.StartLine)
	case errors.Is(e.Err, errTooLong):
		return fmt.Sprintf(`line %d: a record of more than %s, the most one CSV record may hold `+
			`(a '"' left unclosed makes the rest of the file one field; is the file CSV?)`, e.StartLine, formatBytes(e.limit))
	}
	return fmt.Sprintf("line %d, column %d: %v", e.Line, e.Column, e.Err)
}

func (e *csvSyntaxError) Unwrap() error { return e.Err }

// formatBytes writes n bytes in MiB, KiB or bytes, whichever is whole.
func formatBytes(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// csvRecords reads RFC 4180 CSV records, comma-separated, streaming. A
// record ends at LF, CRLF or a lone CR (as pyarrow reads them); a quoted
// field holds its bytes exactly, line ends included, with "" for a '"';
// Quoted tells a quoted empty field ("", the empty string) from an
// unquoted one (null). Blank lines are skipped, but for those after the
// header of a one-column file: there a blank line is a record of one
// unquoted empty field, a null, as quiver get and pyarrow write a null row
// of one column (a row the skip lost). A '"' in an unquoted field, text after a
// closing quote, a quote unclosed at the end of the file, a record of more
// than max bytes and (as encoding/csv's FieldsPerRecord 0) a record with
// another number of fields than the first are errors (*csvSyntaxError).
// On input without CR it reads what encoding/csv reads, with the same line
// numbers.
type csvRecords struct {
	br      *bufio.Reader
	max     int
	fields  int      // of the first record
	numLine int      // lines read
	long    longLine // a line that crosses the reader's buffer
	line    []byte   // such a line, whole
	buf     []byte   // the current record's fields, unquoted, end to end
	big     longLine // buf, once a quoted field makes it span lines and over lineChunk
	ends    []int    // where each field ends in buf
	lines   []int    // the line each field starts on
	quoted  []bool   // whether each field was quoted
	rec     []string // the record, reused
	keep    bool     // keep each record read, for rewind
	kept    []keptRecord
	replay  []keptRecord // the kept records Read gives again first
}

// keptRecord is a record, the lines its fields start on and whether
// each was quoted.
type keptRecord struct {
	rec    []string
	lines  []int
	quoted []bool
}

// rewind makes Read give the records read since keep was set again, and
// stops keeping records. They are kept parsed, not as the bytes they were
// read from: the record's strings are its only copy.
func (r *csvRecords) rewind() {
	r.replay, r.kept, r.keep = r.kept, nil, false
}

// newCSVRecords reads r with records of at most max bytes.
func newCSVRecords(r io.Reader, max int) *csvRecords {
	return &csvRecords{br: bufio.NewReaderSize(r, 1<<16), max: max}
}

// FieldLine is the line field i of the last record starts on.
func (r *csvRecords) FieldLine(i int) int { return r.lines[i] }

// Quoted reports whether field i of the last record was quoted: an empty
// one is then the empty string, not null.
func (r *csvRecords) Quoted(i int) bool { return r.quoted[i] }

// lengthNL is the length of the line end at the end of b: 0, 1 or 2.
func lengthNL(b []byte) int {
	n := len(b)
	switch {
	case n >= 2 && b[n-2] == '\r' && b[n-1] == '\n':
		return 2
	case n >= 1 && (b[n-1] == '\n' || b[n-1] == '\r'):
		return 1
	}
	return 0
}

// readLine returns the next line with its line end (LF, CRLF, CR, or none
// at the end of the file), valid until the next call; io.EOF when there is
// none, errTooLong for a line of more than budget bytes (having read no
// more than about budget of it).
func (r *csvRecords) readLine(budget int) ([]byte, error) {
	r.numLine++
	r.long.reset()
	for {
		b, _ := r.br.Peek(r.br.Buffered()) // what is buffered: never an error
		if len(b) == 0 {
			if _, err := r.br.Peek(1); err != nil && !errors.Is(err, io.EOF) {
				return nil, err
			}
			if b, _ = r.br.Peek(r.br.Buffered()); len(b) == 0 {
				if r.long.n > 0 {
					r.line = r.long.join(r.line)
					return r.line, nil
				}
				return nil, io.EOF
			}
		}
		i := bytes.IndexByte(b, '\n')
		lim := len(b)
		if i >= 0 {
			lim = i
		}
		j := bytes.IndexByte(b[:lim], '\r')
		n, done, crLast := len(b), false, false
		switch {
		case j >= 0 && j+1 < len(b): // CR or CRLF
			n, done = j+1, true
			if b[j+1] == '\n' {
				n++
			}
		case j >= 0: // a CR ends the buffered bytes: is an LF next?
			n, done, crLast = j+1, true, true
		case i >= 0:
			n, done = i+1, true
		}
		if r.long.n+n > budget {
			r.long.reset()
			return nil, errTooLong
		}
		if done && !crLast && r.long.n == 0 {
			_, _ = r.br.Discard(n) // buffered: cannot fail
			return b[:n], nil
		}
		r.long.add(b[:n])
		_, _ = r.br.Discard(n)
		if crLast {
			nb, err := r.br.Peek(1)
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, err
			}
			if len(nb) == 1 && nb[0] == '\n' {
				if r.long.n+1 > budget {
					r.long.reset()
					return nil, errTooLong
				}
				r.long.add(nb)
				_, _ = r.br.Discard(1)
			}
		}
		if done {
			r.line = r.long.join(r.line)
			return r.line, nil
		}
	}
}

// Read returns the next record, valid until the next call; io.EOF at the
// end of the input.
func (r *csvRecords) Read() ([]string, error) {
	if len(r.replay) > 0 {
		k := r.replay[0]
		r.replay[0], r.replay = keptRecord{}, r.replay[1:]
		r.lines, r.quoted = k.lines, k.quoted
		return k.rec, nil
	}
	rec, err := r.read()
	if err == nil && r.keep {
		r.kept = append(r.kept, keptRecord{rec: slices.Clone(rec), lines: slices.Clone(r.lines), quoted: slices.Clone(r.quoted)})
	}
	return rec, err
}

// read reads the next record from the file.
func (r *csvRecords) read() ([]string, error) {
	var line []byte
	for {
		var err error
		line, err = r.readLine(r.max)
		if errors.Is(err, errTooLong) {
			return nil, &csvSyntaxError{StartLine: r.numLine, Line: r.numLine, Err: errTooLong, limit: r.max}
		}
		if err != nil {
			return nil, err
		}
		if len(line) > lengthNL(line) {
			break // not a blank line
		}
		if r.fields == 1 {
			// A null row of a one-column file, after its header: the
			// only way CSV writes one (quiver get, pyarrow).
			r.rec = append(r.rec[:0], "")
			r.lines = append(r.lines[:0], r.numLine)
			r.quoted = append(r.quoted[:0], false)
			return r.rec, nil
		}
	}
	recLine, used := r.numLine, len(line)
	r.buf, r.ends, r.lines, r.quoted = r.buf[:0], r.ends[:0], r.lines[:0], r.quoted[:0]
	r.big.reset()
	posLine, col := r.numLine, 1
	syntax := func(line, col int, err error) error {
		return &csvSyntaxError{StartLine: recLine, Line: line, Column: col, Err: err}
	}
parseField:
	for {
		if len(line) == 0 || line[0] != '"' {
			i := bytes.IndexByte(line, ',')
			field := line
			if i >= 0 {
				field = field[:i]
			} else {
				field = field[:len(field)-lengthNL(field)]
			}
			if j := bytes.IndexByte(field, '"'); j >= 0 {
				return nil, syntax(r.numLine, col+j, stdcsv.ErrBareQuote)
			}
			r.put(field)
			r.ends, r.lines = append(r.ends, r.size()), append(r.lines, posLine)
			r.quoted = append(r.quoted, false)
			if i >= 0 {
				line = line[i+1:]
				col += i + 1
				continue parseField
			}
			break parseField
		}
		fieldLine := posLine
		line = line[1:]
		col++
		for {
			if i := bytes.IndexByte(line, '"'); i >= 0 {
				r.put(line[:i])
				line = line[i+1:]
				col += i + 1
				switch {
				case len(line) > 0 && line[0] == '"': // "" is one "
					r.put(quote)
					line = line[1:]
					col++
				case len(line) > 0 && line[0] == ',':
					line = line[1:]
					col++
					r.ends, r.lines = append(r.ends, r.size()), append(r.lines, fieldLine)
					r.quoted = append(r.quoted, true)
					continue parseField
				case lengthNL(line) == len(line):
					r.ends, r.lines = append(r.ends, r.size()), append(r.lines, fieldLine)
					r.quoted = append(r.quoted, true)
					break parseField
				default:
					return nil, syntax(r.numLine, col-1, stdcsv.ErrQuote)
				}
			} else if len(line) > 0 {
				// The line ends inside the quotes: its line end is the
				// field's, byte for byte.
				if r.big.n == 0 && len(r.buf)+len(line) > lineChunk {
					r.big.add(r.buf)
					r.buf = r.buf[:0]
				}
				r.put(line)
				col += len(line)
				var err error
				line, err = r.readLine(r.max - used)
				if errors.Is(err, errTooLong) {
					return nil, &csvSyntaxError{StartLine: recLine, Line: r.numLine, Err: errTooLong, limit: r.max}
				}
				if err != nil && !errors.Is(err, io.EOF) {
					return nil, err
				}
				used += len(line)
				if len(line) > 0 {
					posLine, col = posLine+1, 1
				}
			} else {
				return nil, &csvSyntaxError{StartLine: recLine, Line: posLine, Column: col, Err: stdcsv.ErrQuote, unclosed: true}
			}
		}
	}
	var str string // one allocation for the record's fields
	if r.big.n > 0 {
		str = r.big.string()
	} else {
		str = string(r.buf)
	}
	r.rec = r.rec[:0]
	start := 0
	for _, end := range r.ends {
		r.rec = append(r.rec, str[start:end])
		start = end
	}
	if r.fields == 0 {
		r.fields = len(r.rec)
	} else if len(r.rec) != r.fields {
		return r.rec, syntax(recLine, 1, stdcsv.ErrFieldCount)
	}
	return r.rec, nil
}

var quote = []byte{'"'}

// put appends b to the current record's fields.
func (r *csvRecords) put(b []byte) {
	if r.big.n > 0 {
		r.big.add(b)
		return
	}
	r.buf = append(r.buf, b...)
}

// size is the length of the current record's fields so far.
func (r *csvRecords) size() int { return len(r.buf) + r.big.n }
