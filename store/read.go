package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/csv"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// ReadOptions select what Read streams.
type ReadOptions struct {
	SnapshotOptions
	// Columns projects the output, in this order; nil means all.
	Columns []string
}

// Read streams a version (latest by default) in index order. Partitions are
// pruned before any file is opened; columns are projected while reading.
// The caller must Release the reader; it must not outlive ctx.
func (s *Store) Read(ctx context.Context, keys []string, o ReadOptions) (array.RecordReader, error) {
	sn, err := s.Snapshot(ctx, keys, o.SnapshotOptions)
	if err != nil {
		return nil, err
	}
	return s.OpenSnapshot(ctx, sn, o.Columns)
}

// Schema returns the schema of a version (-1: latest).
func (s *Store) Schema(ctx context.Context, keys []string, version int) (*arrow.Schema, error) {
	p, err := s.resolve(keys)
	if err != nil {
		return nil, err
	}
	vs, err := s.readableVersion(ctx, p, version)
	if err != nil {
		return nil, err
	}
	return vs.Schema, nil
}

// OpenSnapshot streams exactly the files of sn.
func (s *Store) OpenSnapshot(ctx context.Context, sn *Snapshot, columns []string) (array.RecordReader, error) {
	p, err := s.resolve(sn.Keys)
	if err != nil {
		return nil, err
	}
	out, err := project(sn.Schema, columns)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	r := &snapshotReader{s: s, ctx: ctx, p: p, sn: sn, out: out}
	r.refs.Store(1)
	return r, nil
}

// snapshotReader is an array.RecordReader over a snapshot's files, one
// file open at a time.
type snapshotReader struct {
	refs atomic.Int64
	s    *Store
	ctx  context.Context
	p    profile
	sn   *Snapshot
	out  *arrow.Schema

	next int // next file
	cur  arrow.RecordBatch
	err  error
	file *openFile
}

// openFile is the one file being read.
type openFile struct {
	df       DataFile
	pq       pqarrow.RecordReader
	csv      *csv.Reader
	closeFn  func()
	src      []int         // output column -> column of the file batch, or -1 for a partition column
	consts   []arrow.Array // partition columns, sized to the batch size
	leftRows int64         // rows still to emit when only partition columns are read
}

func (r *snapshotReader) Retain() { r.refs.Add(1) }

func (r *snapshotReader) Release() {
	if r.refs.Add(-1) == 0 {
		r.clear()
		r.closeFile()
	}
}

func (r *snapshotReader) Schema() *arrow.Schema { return r.out }

func (r *snapshotReader) RecordBatch() arrow.RecordBatch { return r.cur }

// Record is the deprecated name of RecordBatch.
func (r *snapshotReader) Record() arrow.RecordBatch { return r.cur }

func (r *snapshotReader) Err() error { return r.err }

func (r *snapshotReader) clear() {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
}

func (r *snapshotReader) closeFile() {
	if r.file == nil {
		return
	}
	if r.file.pq != nil {
		r.file.pq.Release()
	}
	if r.file.csv != nil {
		r.file.csv.Release()
	}
	releaseAll(r.file.consts)
	if r.file.closeFn != nil {
		r.file.closeFn()
	}
	r.file = nil
}

func (r *snapshotReader) Next() bool {
	r.clear()
	if r.err != nil {
		return false
	}
	for {
		if err := r.ctx.Err(); err != nil {
			r.err = err
			r.closeFile()
			return false
		}
		if r.file == nil {
			if r.next >= len(r.sn.Files) {
				return false
			}
			df := r.sn.Files[r.next]
			r.next++
			if err := r.open(df); err != nil {
				r.err = err
				return false
			}
		}
		rec, err := r.readFile()
		if err != nil {
			if r.file.df.Recorded && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				err = fmt.Errorf("%w: %v", ErrDataLoss, err)
			}
			r.err = fmt.Errorf("read %s %s: %w", r.p, r.file.df.Path, err)
			r.closeFile()
			return false
		}
		if rec == nil {
			r.closeFile()
			continue
		}
		if rec.NumRows() == 0 {
			rec.Release()
			continue
		}
		r.cur = rec
		return true
	}
}

func (r *snapshotReader) open(df DataFile) error {
	of := &openFile{df: df, src: make([]int, r.out.NumFields())}
	fileCols := make([]string, 0, r.out.NumFields())
	for i, f := range r.out.Fields() {
		if slices.Contains(r.sn.PartitionBy, f.Name) {
			of.src[i] = -1
			continue
		}
		of.src[i] = len(fileCols)
		fileCols = append(fileCols, f.Name)
	}
	r.file = of
	if r.sn.Format == FormatCSV {
		return r.openCSV(of, fileCols)
	}
	fr, closeFn, err := r.s.openParquet(r.ctx, r.p, df, r.s.opts.readBatchRows)
	if err != nil {
		return err
	}
	of.closeFn = closeFn
	if len(fileCols) == 0 {
		// A projection of partition columns only (or a table without
		// columns, whose Parquet file records no rows): the commit
		// record's count is authoritative when there is one.
		of.leftRows = fr.ParquetReader().NumRows()
		if df.Rows >= 0 {
			of.leftRows = df.Rows
		}
		return nil
	}
	fsc, err := fr.Schema()
	if err != nil {
		return r.s.badFile(r.p, df, err)
	}
	var leaves []int
	for _, name := range fileCols {
		idx := fsc.FieldIndices(name)
		if len(idx) == 0 {
			return r.s.badFile(r.p, df, fmt.Errorf("file lacks column %q", name))
		}
		leaves = appendLeaves(leaves, &fr.Manifest.Fields[idx[0]])
	}
	rr, err := fr.GetRecordReader(r.ctx, leaves, nil)
	if err != nil {
		return r.s.badFile(r.p, df, err)
	}
	of.pq = rr
	// The reader yields fields in file order; map by name.
	rsc := rr.Schema()
	for i, j := range of.src {
		if j >= 0 {
			of.src[i] = rsc.FieldIndices(fileCols[j])[0]
		}
	}
	return nil
}

func appendLeaves(out []int, f *pqarrow.SchemaField) []int {
	if f.IsLeaf() {
		return append(out, f.ColIndex)
	}
	for i := range f.Children {
		out = appendLeaves(out, &f.Children[i])
	}
	return out
}

// readFile returns the next output batch of the open file, or nil at its end.
func (r *snapshotReader) readFile() (arrow.RecordBatch, error) {
	of := r.file
	var in arrow.RecordBatch
	var n int64
	switch {
	case of.pq != nil:
		if !of.pq.Next() {
			return nil, of.pq.Err()
		}
		in = of.pq.RecordBatch()
		n = in.NumRows()
	case of.csv != nil:
		if !of.csv.Next() {
			return nil, of.csv.Err()
		}
		in = of.csv.RecordBatch()
		n = in.NumRows()
	default:
		if of.leftRows <= 0 {
			return nil, nil
		}
		n = min(of.leftRows, r.s.opts.readBatchRows)
		of.leftRows -= n
	}
	cols := make([]arrow.Array, r.out.NumFields())
	for i, f := range r.out.Fields() {
		var err error
		if of.src[i] < 0 {
			cols[i], err = r.partitionColumn(of, i, f, n)
		} else {
			cols[i], err = conformArray(r.ctx, in.Column(of.src[i]), f.Type)
		}
		if err != nil {
			releaseAll(cols)
			return nil, fmt.Errorf("column %q: %w", f.Name, err)
		}
	}
	rec := array.NewRecordBatch(r.out, cols, n)
	releaseAll(cols)
	return rec, nil
}

// partitionColumn returns n copies of the file's value of a partition
// column, slicing one cached array.
func (r *snapshotReader) partitionColumn(of *openFile, i int, f arrow.Field, n int64) (arrow.Array, error) {
	if of.consts == nil {
		of.consts = make([]arrow.Array, r.out.NumFields())
	}
	if c := of.consts[i]; c == nil || int64(c.Len()) < n {
		if c != nil {
			c.Release()
		}
		size := max(n, r.s.opts.readBatchRows)
		raw, ok := of.df.Partition[f.Name]
		if !ok {
			raw = hiveDefaultValue
		}
		a, err := constantColumn(r.s.opts.mem, f.Type, raw, int(size))
		if err != nil {
			return nil, err
		}
		of.consts[i] = a
	}
	return array.NewSlice(of.consts[i], 0, n), nil
}
