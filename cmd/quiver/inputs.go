package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/quiverdb/quiver/store/codec"
)

// Input formats of `quiver put`.
const (
	fmtParquet = "parquet"
	fmtCSV     = "csv"
	fmtArrow   = "arrow" // IPC file (Feather v2) or stream; told apart by the magic
	fmtNDJSON  = "ndjson"
)

// batchRows is how many rows the CSV, NDJSON and Parquet readers put in one
// batch; inferRows is how many leading rows of a CSV or NDJSON file decide
// its column types.
const (
	batchRows = 64 << 10
	inferRows = 1000
)

// inputFormat names the format of path: --format if given, else its
// extension.
func inputFormat(path, forced string) (string, error) {
	if forced != "" {
		switch f := strings.ToLower(forced); f {
		case fmtParquet, fmtCSV, fmtNDJSON:
			return f, nil
		case "arrow", "ipc", "feather", "arrows":
			return fmtArrow, nil
		case "json", "jsonl":
			return fmtNDJSON, nil
		}
		return "", fmt.Errorf("--format %q: want parquet, csv, arrow (IPC/Feather) or ndjson", forced)
	}
	switch strings.ToLower(filepath.Ext(path)) {
	case ".parquet", ".pq", ".parq":
		return fmtParquet, nil
	case ".csv":
		return fmtCSV, nil
	case ".arrow", ".arrows", ".ipc", ".feather", ".fea":
		return fmtArrow, nil
	case ".ndjson", ".jsonl", ".json":
		return fmtNDJSON, nil
	}
	return "", fmt.Errorf("%s: unknown file type (use .parquet, .csv, .arrow/.feather/.ipc or .ndjson, or set --format)", path)
}

// countingFile counts the bytes read from a file, for the progress bar.
type countingFile struct {
	f    *os.File
	prog *progress
}

func (c *countingFile) Read(p []byte) (int, error) {
	n, err := c.f.Read(p)
	c.prog.add(int64(n))
	return n, err
}

func (c *countingFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.f.ReadAt(p, off)
	c.prog.add(int64(n))
	return n, err
}

func (c *countingFile) Seek(off int64, whence int) (int64, error) { return c.f.Seek(off, whence) }

// input is one opened FILE of a put: a stream of batches, read lazily.
type input struct {
	path   string
	format string
	rdr    array.RecordReader
	closer func() error
}

func (in *input) Close() error {
	if in.rdr != nil {
		in.rdr.Release()
	}
	if in.closer != nil {
		return in.closer()
	}
	return nil
}

// profileTypes is the schema of the profile an append of CSV or NDJSON
// goes to: its columns are read as their types in the profile, not
// inferred (textconv.go).
type profileTypes struct {
	name   string // the profile, for messages
	schema *arrow.Schema
}

// openInput opens path as format. Only the schema (and for CSV and NDJSON
// the first inferRows rows) is read here; the rest streams.
func openInput(ctx context.Context, path, format string, mem memory.Allocator, prog *progress) (*input, error) {
	return openInputAs(ctx, path, format, mem, prog, nil)
}

// openInputAs is openInput with the CSV or NDJSON file read as the types of
// target, the profile it is appended to (nil: inferred).
func openInputAs(ctx context.Context, path, format string, mem memory.Allocator, prog *progress, target *profileTypes) (*input, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	in := &input{path: path, format: format, closer: f.Close}
	src := &countingFile{f: f, prog: prog}
	switch format {
	case fmtParquet:
		err = in.openParquet(ctx, src, mem)
	case fmtCSV:
		err = in.openCSV(src, mem, target)
	case fmtArrow:
		err = in.openArrow(src, mem)
	case fmtNDJSON:
		err = in.openNDJSON(src, mem, target)
	default:
		err = fmt.Errorf("unknown format %q", format)
	}
	if err != nil {
		_ = in.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return in, nil
}

// openParquet streams a Parquet file row group by row group, with the
// schema it was written with (field ids stripped at every depth, as the
// store strips them).
func (in *input) openParquet(ctx context.Context, src *countingFile, mem memory.Allocator) error {
	st, err := src.f.Stat()
	if err != nil {
		return err
	}
	pf, err := codec.OpenParquet(src, st.Size(), codec.ReadOptions{BatchRows: batchRows, Allocator: mem})
	if err != nil {
		return err
	}
	prev := in.closer
	in.closer = func() error { return errors.Join(pf.Close(), prev()) }
	rr, err := pf.Records(ctx, nil)
	if err != nil {
		return err
	}
	in.rdr = rr
	return nil
}

// openArrow reads an Arrow IPC file (Feather v2) batch by batch, or an
// IPC stream when the file does not start with the file magic.
func (in *input) openArrow(src *countingFile, mem memory.Allocator) error {
	magic := make([]byte, 6)
	n, _ := io.ReadFull(src.f, magic)
	if _, err := src.f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if n == 6 && string(magic) == "ARROW1" {
		fr, err := ipc.NewFileReader(src, ipc.WithAllocator(mem))
		if err != nil {
			return fmt.Errorf("not an Arrow IPC file: %w", err)
		}
		prev := in.closer
		in.closer = func() error { return errors.Join(fr.Close(), prev()) }
		in.rdr = &ipcFileReader{fr: fr}
		return nil
	}
	r, err := ipc.NewReader(src, ipc.WithAllocator(mem))
	if err != nil {
		return fmt.Errorf("not an Arrow IPC file or stream: %w", err)
	}
	in.rdr = r
	return nil
}

// ipcFileReader walks an IPC file's batches as a RecordReader.
type ipcFileReader struct {
	fr  *ipc.FileReader
	i   int
	cur arrow.RecordBatch
	err error
}

func (r *ipcFileReader) Retain()               {}
func (r *ipcFileReader) Release()              { r.release() }
func (r *ipcFileReader) Schema() *arrow.Schema { return r.fr.Schema() }
func (r *ipcFileReader) RecordBatch() arrow.RecordBatch {
	return r.cur
}
func (r *ipcFileReader) Record() arrow.RecordBatch { return r.cur } //nolint:staticcheck // interface
func (r *ipcFileReader) Err() error                { return r.err }
func (r *ipcFileReader) release() {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
}
func (r *ipcFileReader) Next() bool {
	r.release()
	if r.err != nil || r.i >= r.fr.NumRecords() {
		return false
	}
	rec, err := r.fr.RecordBatch(r.i)
	if err != nil {
		r.err = err
		return false
	}
	r.i++
	rec.Retain() // the file reader reuses its batch on the next call
	r.cur = rec
	return true
}

// openCSV reads a CSV file with a header row (after a UTF-8 byte order
// mark, if any). Column types are inferred from the first inferRows rows by
// the store's own rule (codec.CSVInference, what polars and so pyrosome
// infer): int64, then float64, true/false in any case as bool, else
// string; a quoted empty field ("") is the empty string, and makes its
// column a string column (csvStringColumns). Only an unquoted empty field
// is null (in a one-column file also a blank line: csvRecords). Every row is then
// checked by the same rule (csvInput): a later field that would have given
// its column another type, or a row with more fields than the header, is
// refused, naming its line.
//
// Appended to a profile (target), the file's columns that the profile has
// are read as the profile's types instead, and go in the profile's order,
// followed by the file's other columns (inferred: new columns, which the
// server takes under a higher schema version). The header must name every
// column of the profile, as an Arrow put must carry them.
func (in *input) openCSV(src io.Reader, mem memory.Allocator, target *profileTypes) error {
	r, err := skipBOM(src)
	if err != nil {
		return fmt.Errorf("CSV: %w", err)
	}
	// The inference keeps the records it reads, and the reader gives them
	// again: the file is read once, and held once (raw bytes teed for a
	// replay were a second copy of each line, red team round 13, e04).
	recs := newCSVRecords(r, maxRecordBytes)
	recs.keep = true
	var inf codec.CSVInference
	var strs csvStringColumns
	if err := inf.AddRecords(strs.read(recs), inferRows); err != nil {
		return csvError(err, inf.Schema())
	}
	sc := strs.schema(inf.Schema())
	if sc.NumFields() == 0 {
		return errors.New("no CSV header row")
	}
	recs.rewind()
	var rdr *csvInput
	if target == nil {
		rdr, err = newCSVInput(recs, sc, batchRows, mem)
	} else {
		out, convs, typed, terr := typedCSVColumns(sc, target)
		if terr != nil {
			return terr
		}
		rdr, err = newTypedCSVInput(recs, typed, out, convs, target.name, batchRows, mem)
	}
	if err != nil {
		return err
	}
	in.rdr = rdr
	return nil
}

// csvStringColumns notes the columns that hold a quoted empty field ("")
// in the rows the inference reads: it is the empty string, so that such a
// column is a string column, as polars infers it (codec.CSVInference,
// which sees only the fields' text, takes it for null). A string column
// whose values look like numbers, with an empty one among them, so keeps
// its type through quiver get and put.
type csvStringColumns struct {
	rows    int
	strings []bool // by column
}

// read is recs.Read, noting quoted empty fields after the header.
func (c *csvStringColumns) read(recs *csvRecords) func() ([]string, error) {
	return func() ([]string, error) {
		rec, err := recs.Read()
		if err != nil {
			return rec, err
		}
		if c.rows++; c.rows == 1 {
			c.strings = make([]bool, len(rec))
			return rec, nil
		}
		for i, v := range rec {
			if v == "" && i < len(c.strings) && recs.Quoted(i) {
				c.strings[i] = true
			}
		}
		return rec, nil
	}
}

// schema is sc, the inferred schema, with the noted columns strings.
func (c *csvStringColumns) schema(sc *arrow.Schema) *arrow.Schema {
	fields := sc.Fields()
	changed := false
	for i := range fields {
		if i < len(c.strings) && c.strings[i] && fields[i].Type.ID() != arrow.STRING {
			fields[i].Type, changed = arrow.BinaryTypes.String, true
		}
	}
	if !changed {
		return sc
	}
	return arrow.NewSchema(fields, nil)
}

// typedCSVColumns lays out a CSV file whose header and inferred types are
// sc for an append to target: the profile's columns in its order, as its
// types, then the file's other columns as inferred. out is the column of
// each field of a record, convs its reader (nil: inferred). A profile
// column the header lacks is an error, as the server's for an Arrow put.
func typedCSVColumns(sc *arrow.Schema, target *profileTypes) (out []int, convs []*valueConv, typed *arrow.Schema, err error) {
	pos := make(map[string]int, sc.NumFields())
	for i, f := range sc.Fields() {
		pos[f.Name] = i
	}
	var missing []string
	for _, f := range target.schema.Fields() {
		if _, ok := pos[f.Name]; !ok {
			missing = append(missing, f.Name)
		}
	}
	if len(missing) > 0 {
		var like string
		for _, m := range missing {
			for _, f := range sc.Fields() {
				if strings.EqualFold(f.Name, m) {
					like = fmt.Sprintf(" (column names are case-sensitive: the header has %q, the profile %q)", f.Name, m)
					break
				}
			}
		}
		return nil, nil, nil, fmt.Errorf("the CSV header does not match the columns of %s: it lacks %s%s; an append carries every column of the profile "+
			"(its columns are never dropped): add them, with empty fields for nulls, or put with --mode write for a new schema",
			target.name, codec.QuoteNames(missing), like)
	}
	out = make([]int, sc.NumFields())
	convs = make([]*valueConv, sc.NumFields())
	fields := target.schema.Fields()
	for j, f := range fields {
		i := pos[f.Name]
		out[i], convs[i] = j, newValueConv(f.Type, f.Nullable)
	}
	for i, f := range sc.Fields() {
		if convs[i] == nil {
			out[i] = len(fields)
			fields = append(fields, f)
		}
	}
	return out, convs, arrow.NewSchema(fields, nil), nil
}

// openNDJSON reads newline-delimited JSON objects, one a line (after a
// UTF-8 byte order mark, if any). The columns are the keys of the first
// inferRows objects, in order of first appearance; their types are inferred
// from the values (int64, float64, bool, string; ints and floats together
// are float64, only nulls string). Every line is then decoded by the same
// rule (ndjsonInput): a key the first objects lack, or a value of another
// JSON type than its column's, is refused, naming its line, never dropped
// or converted. Nested objects and arrays are refused with a clear error:
// for nested data use Parquet or Arrow IPC, which carry their schema.
//
// Appended to a profile (target), the profile's columns come first, in its
// order and as its types, whatever keys the objects have (a key an object
// lacks is null, as in any NDJSON object); the keys that are not the
// profile's columns follow, inferred from the first inferRows objects as
// above (new columns, which the server takes under a higher schema
// version).
func (in *input) openNDJSON(src io.Reader, mem memory.Allocator, target *profileTypes) error {
	r, err := skipBOM(src)
	if err != nil {
		return fmt.Errorf("NDJSON: %w", err)
	}
	lines := newNDJSONLines(r, maxRecordBytes)
	lines.keep = true // given again to the reader: the file is read once
	var inf ndjsonInference
	if target != nil {
		inf.target, inf.mem = target, mem
		inf.convs, inf.scratch = map[string]*valueConv{}, map[string]array.Builder{}
		for _, f := range target.schema.Fields() {
			inf.convs[f.Name] = newValueConv(f.Type, f.Nullable)
		}
		defer inf.release()
	}
	objects := 0
	for n := 0; n < inferRows; {
		b, err := lines.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if !isJSONBlank(b) {
			n++
			objects++
			if err := inf.add(b); err != nil {
				return fmt.Errorf("NDJSON line %d: %w", lines.line, err)
			}
		}
	}
	if len(inf.names) == 0 && (target == nil || objects == 0) {
		return errors.New("NDJSON: no objects to take columns from")
	}
	lines.rewind()
	in.rdr = newNDJSONInput(lines, &inf, batchRows, mem)
	return nil
}

// sameColumns explains how schema b differs from a in names or types; it
// ignores nullability and metadata, which the first file's schema decides.
func sameColumns(a, b *arrow.Schema) error {
	if a.NumFields() != b.NumFields() {
		return fmt.Errorf("%d columns (%s), not %d (%s)", b.NumFields(), columnNames(b), a.NumFields(), columnNames(a))
	}
	for i := range a.NumFields() {
		fa, fb := a.Field(i), b.Field(i)
		if fa.Name != fb.Name {
			return fmt.Errorf("column %d is %q, not %q", i+1, fb.Name, fa.Name)
		}
		if !arrow.TypeEqual(fa.Type, fb.Type) {
			return fmt.Errorf("column %q is %s, not %s", fa.Name, fb.Type, fa.Type)
		}
	}
	return nil
}

func columnNames(s *arrow.Schema) string {
	names := make([]string, s.NumFields())
	for i, f := range s.Fields() {
		names[i] = f.Name
	}
	return strings.Join(names, ", ")
}
