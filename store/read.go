package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/quiverdb/quiver/store/codec"
)

// readBatchBytes bounds the size of a batch a reader yields (besides
// WithReadBatchRows), so a DoGet whose client stops reading holds a few
// MiB, not 64 Ki rows of a wide table.
const readBatchBytes = 4 << 20

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
	out, err := codec.Project(sn.Schema, columns)
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
	df      DataFile
	rr      array.RecordReader
	close   func()
	src     []int         // output column -> column of the file batch, or -1 for a partition column
	consts  []arrow.Array // partition columns, sized to the batch size
	counted bool          // the file reader yields no columns, only rows
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
	if r.file.rr != nil {
		r.file.rr.Release()
	}
	releaseAll(r.file.consts)
	if r.file.close != nil {
		r.file.close()
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
				r.closeFile()
				r.err = err
				return false
			}
		}
		rec, err := r.readFile()
		if err != nil {
			if r.file.df.Recorded && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, ErrDataLoss) {
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

// open opens one file and plans how its batches become output batches.
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
	f, err := r.s.openData(r.ctx, r.p, df, r.s.opts.verifyReads)
	if err != nil {
		return err
	}
	ropts := codec.ReadOptions{BatchRows: r.s.opts.readBatchRows, BatchBytes: readBatchBytes, Allocator: r.s.opts.mem}
	if r.sn.Format == FormatCSV {
		of.close = func() { _ = f.Close() }
		rr, err := codec.NewCSVReader(f, r.sn.Schema, fileCols, ropts)
		if err != nil {
			return r.s.badFile(r.p, df, err)
		}
		of.rr = rr
		return nil
	}
	pf, err := codec.OpenParquet(f, f.Size(), ropts)
	if err != nil {
		f.Close()
		return r.s.badFile(r.p, df, err)
	}
	of.close = func() { _ = pf.Close(); _ = f.Close() }
	if err := r.s.checkRows(r.p, df, pf.Footer().Rows, pf.Schema().NumFields()); err != nil {
		return err
	}
	if len(fileCols) == 0 && df.Recorded && df.Rows >= 0 && pf.Footer().Rows != df.Rows {
		// A file of a table without columns records no rows: the commit
		// record's count is authoritative.
		of.counted = true
		return nil
	}
	rr, err := pf.Records(r.ctx, fileCols)
	if err != nil {
		return r.s.badFile(r.p, df, err)
	}
	of.rr = rr
	return nil
}

// readFile returns the next output batch of the open file, or nil at its end.
func (r *snapshotReader) readFile() (arrow.RecordBatch, error) {
	of := r.file
	var in arrow.RecordBatch
	var n int64
	if of.counted {
		if of.df.Rows <= 0 {
			return nil, nil
		}
		n = min(of.df.Rows, r.s.opts.readBatchRows)
		of.df.Rows -= n
	} else {
		if !of.rr.Next() {
			return nil, of.rr.Err()
		}
		in = of.rr.RecordBatch()
		n = in.NumRows()
	}
	cols := make([]arrow.Array, r.out.NumFields())
	for i, f := range r.out.Fields() {
		var err error
		if of.src[i] < 0 {
			cols[i], err = r.partitionColumn(of, i, f, n)
		} else {
			cols[i], err = codec.ConformArray(r.ctx, in.Column(of.src[i]), f.Type)
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
			raw = codec.HiveDefault
		}
		a, err := codec.ConstantColumn(r.s.opts.mem, f.Type, raw, int(size))
		if err != nil {
			return nil, err
		}
		of.consts[i] = a
	}
	return array.NewSlice(of.consts[i], 0, n), nil
}

func releaseAll(arrs []arrow.Array) {
	for _, a := range arrs {
		if a != nil {
			a.Release()
		}
	}
}
