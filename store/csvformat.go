package store

import (
	"context"
	stdcsv "encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/csv"
)

// checkCSVTypes refuses columns that have no faithful text form.
func checkCSVTypes(sc *arrow.Schema) error {
	var bad []string
	for _, f := range sc.Fields() {
		switch f.Type.ID() {
		case arrow.LIST, arrow.LARGE_LIST, arrow.FIXED_SIZE_LIST, arrow.STRUCT, arrow.MAP,
			arrow.SPARSE_UNION, arrow.DENSE_UNION, arrow.LIST_VIEW, arrow.LARGE_LIST_VIEW, arrow.RUN_END_ENCODED:
			bad = append(bad, fmt.Sprintf("%q (%s)", f.Name, f.Type))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: nested columns %s cannot be stored in a CSV profile; use parquet", ErrInvalidArgument, strings.Join(bad, ", "))
	}
	return nil
}

// csvKind is what a CSV column's values allow, narrowest first.
type csvKind struct{ isInt, isFloat, isBool bool }

// inferCSVSchema infers column types over every file of a CSV version, as
// pyrosome's CsvDal (polars) would: Int64, Float64, Boolean, else String.
// A CSV stores no schema; the header of the first file gives the order.
func (s *Store) inferCSVSchema(ctx context.Context, p profile, files []DataFile) (*arrow.Schema, error) {
	var names []string
	kinds := map[string]*csvKind{}
	for fi, df := range files {
		f, err := s.openData(ctx, p, df, false)
		if err != nil {
			return nil, err
		}
		err = func() error {
			defer f.Close()
			r := stdcsv.NewReader(f)
			r.ReuseRecord = true
			header, err := r.Read()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			header = append([]string(nil), header...)
			if fi == 0 || names == nil {
				names = header
				for _, h := range header {
					kinds[h] = &csvKind{true, true, true}
				}
			} else if !sameSet(names, header) {
				return fmt.Errorf("%w: columns %s do not match %s", ErrSchemaMismatch, quoteNames(header), quoteNames(names))
			}
			for {
				rec, err := r.Read()
				if errors.Is(err, io.EOF) {
					return nil
				}
				if err != nil {
					return err
				}
				for i, v := range rec {
					if v == "" || i >= len(header) {
						continue
					}
					k := kinds[header[i]]
					if k.isInt {
						if _, err := strconv.ParseInt(v, 10, 64); err != nil {
							k.isInt = false
						}
					}
					if k.isFloat && !k.isInt {
						if _, err := strconv.ParseFloat(v, 64); err != nil {
							k.isFloat = false
						}
					}
					if k.isBool {
						lv := strings.ToLower(v)
						k.isBool = lv == "true" || lv == "false"
					}
				}
			}
		}()
		if err != nil {
			return nil, &CorruptionError{Path: p.join(df.Path), Err: err}
		}
	}
	fields := make([]arrow.Field, len(names))
	for i, n := range names {
		fields[i] = arrow.Field{Name: n, Type: csvKindType(kinds[n]), Nullable: true}
	}
	return arrow.NewSchema(fields, nil), nil
}

func csvKindType(k *csvKind) arrow.DataType {
	switch {
	case k.isBool && k.isInt: // no values at all
		return arrow.BinaryTypes.String
	case k.isInt:
		return arrow.PrimitiveTypes.Int64
	case k.isFloat:
		return arrow.PrimitiveTypes.Float64
	case k.isBool:
		return arrow.FixedWidthTypes.Boolean
	}
	return arrow.BinaryTypes.String
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[string]bool{}
	for _, x := range a {
		m[x] = true
	}
	for _, x := range b {
		if !m[x] {
			return false
		}
	}
	return true
}

// openCSV opens a CSV data file with the version's inferred types, in the
// file's own column order.
func (r *snapshotReader) openCSV(of *openFile, fileCols []string) error {
	f, err := r.s.openData(r.ctx, r.p, of.df, r.s.opts.verifyReads)
	if err != nil {
		return err
	}
	header, err := stdcsv.NewReader(f).Read()
	if errors.Is(err, io.EOF) {
		f.Close()
		of.leftRows = 0
		return nil
	}
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		f.Close()
		return &CorruptionError{Path: r.p.join(of.df.Path), Err: err}
	}
	fields := make([]arrow.Field, len(header))
	for i, h := range header {
		idx := r.sn.Schema.FieldIndices(h)
		if len(idx) == 0 {
			f.Close()
			return &CorruptionError{Path: r.p.join(of.df.Path), Err: fmt.Errorf("unexpected column %q", h)}
		}
		fields[i] = r.sn.Schema.Field(idx[0])
	}
	fsc := arrow.NewSchema(fields, nil)
	of.closeFn = func() { _ = f.Close() }
	if len(fileCols) == 0 {
		// Count rows for a projection with no columns.
		cr := stdcsv.NewReader(f)
		var n int64 = -1
		for {
			if _, err := cr.Read(); err != nil {
				break
			}
			n++
		}
		of.leftRows = max(n, 0)
		return nil
	}
	of.csv = csv.NewReader(f, fsc, csv.WithHeader(true), csv.WithChunk(int(r.s.opts.readBatchRows)), csv.WithNullReader(true, ""), csv.WithAllocator(r.s.opts.mem))
	for i, j := range of.src {
		if j >= 0 {
			of.src[i] = fsc.FieldIndices(fileCols[j])[0]
		}
	}
	return nil
}
