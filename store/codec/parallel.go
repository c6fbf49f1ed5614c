package codec

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"runtime"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/arrow-go/v18/parquet/schema"

	"github.com/quiverdb/quiver/internal/par"
)

// parquetWriter is what FileWriter needs of a Parquet encoder: pqarrow's
// FileWriter, or columnWriter for flat schemas.
type parquetWriter interface {
	AppendKeyValueMetadata(key, value string) error
	RowGroupNumRows() (int, error)
	NewBufferedRowGroupChecked() error
	WriteBuffered(rec arrow.RecordBatch) error
	RowGroupTotalBytesWritten() int64
	Close() error
}

// parallelMinRows is the smallest batch whose columns are encoded in
// parallel: below it the goroutines cost more than they save.
const parallelMinRows = 8 << 10

// columnWriter encodes the columns of a flat schema (every column one
// Parquet leaf: no lists, structs or maps) in parallel, each into its own
// column chunk of the buffered row group, which pqarrow (v18.8) cannot: a
// row group's column chunks are independent (own pages, own compressor,
// own statistics) until the row group is closed and written in column
// order. Each column is written by pqarrow.WriteArrowToColumn, the same
// function pqarrow's FileWriter uses for a leaf, with the definition
// levels of a flat column, so the file is the one pqarrow would write
// (schema, ARROW:schema, key-value metadata, encodings, statistics).
type columnWriter struct {
	fw       *file.Writer
	rgw      file.BufferedRowGroupWriter
	props    pqarrow.ArrowWriterProperties
	optional []bool // the column's Parquet repetition is OPTIONAL
	workers  int
	closed   bool
}

// flatColumns reports whether every field of sc is one Parquet leaf of
// pqs at the top level.
func flatColumns(sc *arrow.Schema, pqs *schema.Schema) bool {
	if pqs.NumColumns() != sc.NumFields() {
		return false
	}
	for i := range pqs.NumColumns() {
		c := pqs.Column(i)
		if len(c.ColumnPath()) != 1 || c.MaxRepetitionLevel() != 0 || c.MaxDefinitionLevel() > 1 || c.ColumnPath()[0] != sc.Field(i).Name {
			return false
		}
		switch sc.Field(i).Type.(type) {
		case arrow.NestedType, arrow.ExtensionType:
			return false
		}
	}
	return true
}

// newColumnWriter starts a file of the flat schema sc (see flatColumns;
// pqs is sc as Parquet's) on w, or returns nil when sc is not flat or one
// core is all there is.
func newColumnWriter(sc *arrow.Schema, pqs *schema.Schema, w io.Writer, props *parquet.WriterProperties, aprops pqarrow.ArrowWriterProperties) (*columnWriter, error) {
	workers := min(runtime.GOMAXPROCS(0), sc.NumFields())
	if workers < 2 {
		return nil, nil
	}
	if !flatColumns(sc, pqs) {
		return nil, nil
	}
	// The footer pqarrow writes: the schema's metadata, then the Arrow
	// schema (a flat schema needs none of pqarrow's normalisation).
	meta := make(metadata.KeyValueMetadata, 0, sc.Metadata().Len()+1)
	md := sc.Metadata()
	for i := range md.Len() {
		meta.Append(md.Keys()[i], md.Values()[i])
	}
	meta.Append("ARROW:schema", base64.StdEncoding.EncodeToString(flight.SerializeSchema(sc, props.Allocator())))
	fw, err := file.NewParquetWriterWithError(w, pqs.Root(), file.WithWriterProps(props), file.WithWriteMetadata(meta))
	if err != nil {
		return nil, err
	}
	cw := &columnWriter{fw: fw, props: aprops, workers: workers, optional: make([]bool, sc.NumFields())}
	for i := range cw.optional {
		cw.optional[i] = pqs.Column(i).MaxDefinitionLevel() == 1
	}
	return cw, nil
}

func (cw *columnWriter) AppendKeyValueMetadata(key, value string) error {
	return cw.fw.AppendKeyValueMetadata(key, value)
}

func (cw *columnWriter) RowGroupNumRows() (int, error) {
	if cw.rgw == nil {
		return 0, nil
	}
	return cw.rgw.NumRows()
}

func (cw *columnWriter) NewBufferedRowGroupChecked() error {
	if cw.rgw != nil {
		if err := cw.closeRowGroup(); err != nil {
			return err
		}
	}
	rgw, err := cw.fw.AppendBufferedRowGroupChecked()
	if err != nil {
		return err
	}
	cw.rgw = rgw
	return nil
}

// endRowGroup ends the open row group without starting another: the
// next write starts one. (NewBufferedRowGroupChecked starts the next at
// once, which a file that ends then records as an empty row group.)
func (cw *columnWriter) endRowGroup() error {
	if cw.rgw == nil {
		return nil
	}
	if n, err := cw.rgw.NumRows(); err != nil || n == 0 {
		return err // (an empty one stays open for the next write)
	}
	err := cw.closeRowGroup()
	cw.rgw = nil
	return err
}

// closeRowGroup closes the open row group, the last page of each column
// built (encoded, compressed) in parallel first: rowGroupWriter.Close
// builds them one column after another, and for a small row group (a
// commit cycle's shared file of small appends) that is most of its
// encoding, on the commit cycle's path. The file is the one Close alone
// writes: each column's pages are built in the same order, the
// dictionary page still written before them.
func (cw *columnWriter) closeRowGroup() error {
	n := cw.rgw.NumColumns()
	if n > 1 && parallelLastPages {
		err := par.ForEach(n, cw.workers, func(i int) error {
			ccw, err := cw.rgw.Column(i)
			if err != nil {
				return err
			}
			return flushLastPage(ccw)
		})
		if err != nil {
			return err
		}
	}
	return cw.rgw.Close()
}

// parallelLastPages turns closeRowGroup's parallel page builds on (off
// only in tests, to compare).
var parallelLastPages = true

// flushLastPage builds the page ccw holds values for, if it does. Only
// a column with page statistics tells (they count the values and nulls
// of the page being filled); without them Close builds it.
func flushLastPage(ccw file.ColumnChunkWriter) error {
	f, ok := ccw.(interface{ FlushCurrentPage() error })
	st := ccw.PageStatistics()
	if !ok || st == nil || st.NumValues()+st.NullCount() == 0 {
		return nil
	}
	return f.FlushCurrentPage()
}

func (cw *columnWriter) RowGroupTotalBytesWritten() int64 {
	if cw.rgw == nil {
		return 0
	}
	return cw.rgw.TotalBytesWritten()
}

// WriteBuffered adds rec to the open row group (started if there is
// none), its columns encoded in parallel. The caller keeps the row group
// within its row limit.
func (cw *columnWriter) WriteBuffered(rec arrow.RecordBatch) error {
	if cw.closed {
		return errors.New("codec: write to a closed Parquet writer")
	}
	if cw.rgw == nil {
		if err := cw.NewBufferedRowGroupChecked(); err != nil {
			return err
		}
	}
	n := int(rec.NumCols())
	if rec.NumRows() < parallelMinRows {
		for i := range n {
			if err := cw.writeColumn(rec, i); err != nil {
				return err
			}
		}
		return nil
	}
	return par.ForEach(n, cw.workers, func(i int) error { return cw.writeColumn(rec, i) })
}

// writeColumn encodes column i of rec into its column chunk.
func (cw *columnWriter) writeColumn(rec arrow.RecordBatch, i int) error {
	ccw, err := cw.rgw.Column(i)
	if err != nil {
		return err
	}
	arr := rec.Column(i)
	var def []int16
	if cw.optional[i] {
		def = make([]int16, arr.Len())
		switch {
		case arr.DataType().ID() == arrow.NULL:
			// All null (IsValid answers true: a null array has no
			// bitmap): every level 0, as pqarrow writes it. Levels of
			// 1 with no values made files no reader decodes (red team
			// round 7's r02).
		case arr.NullN() == 0:
			for k := range def {
				def[k] = 1
			}
		default:
			for k := range def {
				if arr.IsValid(k) {
					def[k] = 1
				}
			}
		}
	}
	// Each column its own write context: its scratch buffer is not
	// shared between goroutines.
	ctx := pqarrow.NewArrowWriteContext(context.Background(), &cw.props)
	if err := pqarrow.WriteArrowToColumn(ctx, ccw, arr, def, nil, cw.optional[i]); err != nil {
		return fmt.Errorf("column %q: %w", rec.ColumnName(i), err)
	}
	return nil
}

func (cw *columnWriter) Close() error {
	if cw.closed {
		return nil
	}
	cw.closed = true
	if cw.rgw != nil {
		if err := cw.closeRowGroup(); err != nil {
			return err
		}
	}
	return cw.fw.Close()
}
