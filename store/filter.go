package store

import (
	"context"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiverdb/quiver/store/codec"
	"github.com/quiverdb/quiver/store/filter"
)

// Row filters (issue 16). A snapshot taken with SnapshotOptions.Filter
// carries the filter bound to its schema (Snapshot.Filter) and holds only
// the files whose partition values may pass it (step 1: before any file is
// opened). A read of it skips the row groups whose statistics rule the
// filter out (step 2: ReadSnapshot, or PruneSnapshot ahead of the read)
// and keeps exactly the rows of the others for which the filter is true
// (step 3). Filtered reads do not use the IPC cache.

// bindFilter binds e to sn's schema and drops the files whose partition
// values rule it out.
func (s *Store) bindFilter(sn *Snapshot, e *filter.Expr) error {
	b, err := filter.Bind(e, sn.Schema)
	if err != nil {
		return fmt.Errorf("read %s %s: %w", sn.Path(), VersionName(sn.Version), err)
	}
	sn.Filter = b
	var parts []string
	for _, c := range b.Columns() {
		if slices.Contains(sn.PartitionBy, c) {
			parts = append(parts, c)
		}
	}
	if len(parts) == 0 {
		return nil
	}
	pv := newPartValues(sn.Schema, parts)
	defer pv.release()
	out := sn.Files[:0:0]
	for _, f := range sn.Files {
		stats, err := pv.stats(f)
		if err != nil {
			return fmt.Errorf("read %s %s: partition value of %s: %w", sn.Path(), VersionName(sn.Version), f.Path, err)
		}
		if b.Eval(stats).Possible() {
			out = append(out, f)
		}
	}
	sn.Files = out
	return nil
}

// partValues makes the one-row arrays of partition values a filter's
// partition step compares, once per distinct value.
type partValues struct {
	sc    *arrow.Schema
	cols  []string
	cache map[[2]string]arrow.Array
}

func newPartValues(sc *arrow.Schema, cols []string) *partValues {
	return &partValues{sc: sc, cols: cols, cache: map[[2]string]arrow.Array{}}
}

func (pv *partValues) release() {
	for _, a := range pv.cache {
		a.Release()
	}
	clear(pv.cache)
}

// stats summarizes a file's partition columns.
func (pv *partValues) stats(f DataFile) (filter.Stats, error) {
	vals := make(map[string]arrow.Array, len(pv.cols))
	for _, c := range pv.cols {
		raw, ok := f.Partition[c]
		if !ok {
			raw = codec.HiveDefault
		}
		k := [2]string{c, raw}
		a, ok := pv.cache[k]
		if !ok {
			idx := pv.sc.FieldIndices(c)
			if len(idx) != 1 {
				return nil, fmt.Errorf("%w: no column %q", ErrInvalidArgument, c)
			}
			var err error
			if a, err = codec.ConstantColumn(memory.DefaultAllocator, pv.sc.Field(idx[0]).Type, raw, 1); err != nil {
				return nil, err
			}
			pv.cache[k] = a
		}
		vals[c] = a
	}
	return filter.PartitionStats(vals), nil
}

// selectRowGroups lists the row groups of an open Parquet file whose
// statistics (and the file's partition values) let some row pass b; nil
// when all of them may.
func selectRowGroups(b *filter.Bound, pf *codec.ParquetFile, part filter.Stats) ([]int, filter.Outcome) {
	n := pf.NumRowGroups()
	keep := make([]int, 0, n)
	var all filter.Outcome
	for i := 0; i < n; i++ {
		o := b.Eval(filter.Chain(part, filter.RowGroupStats(pf.RowGroup(i), pf.Leaf)))
		if o.Possible() {
			keep = append(keep, i)
			all |= o
		}
	}
	if len(keep) == n {
		return nil, all
	}
	return keep, all
}

// PruneSnapshot applies the row-group step of sn's filter ahead of a read,
// for planning: it opens each Parquet file's footer and drops the files
// none of whose row groups may pass the filter. rows is the exact number
// of rows the read will stream when the statistics tell it (every
// remaining row group passes whole), else -1. Without a filter it does
// nothing and rows is sn.Rows(). CSV files are kept as they are (they have
// no statistics).
func (s *Store) PruneSnapshot(ctx context.Context, sn *Snapshot) (rows int64, err error) {
	if sn.Filter == nil {
		return sn.Rows(), nil
	}
	p, err := s.resolve(sn.Keys)
	if err != nil {
		return 0, err
	}
	if sn.Format == FormatCSV {
		return -1, nil
	}
	var parts []string
	for _, c := range sn.Filter.Columns() {
		if slices.Contains(sn.PartitionBy, c) {
			parts = append(parts, c)
		}
	}
	pv := newPartValues(sn.Schema, parts)
	defer pv.release()
	out := make([]DataFile, 0, len(sn.Files))
	rows = 0
	for _, df := range sn.Files {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		n, keep, err := s.pruneFile(ctx, p, sn, df, pv)
		if err != nil {
			return 0, fmt.Errorf("read %s %s: %w", p, df.Path, err)
		}
		if !keep {
			continue
		}
		out = append(out, df)
		if rows >= 0 && n >= 0 {
			rows += n
		} else {
			rows = -1
		}
	}
	sn.Files = out
	return rows, nil
}

// pruneFile tells whether some row of a file may pass sn's filter, and
// how many rows pass when every row group passes whole (else -1).
func (s *Store) pruneFile(ctx context.Context, p profile, sn *Snapshot, df DataFile, pv *partValues) (int64, bool, error) {
	part, err := pv.stats(df)
	if err != nil {
		return 0, false, err
	}
	switch o := sn.Filter.Eval(part); {
	case !o.Possible():
		return 0, false, nil
	case o.Always() && df.Rows >= 0:
		return df.Rows, true, nil // the partition values decide: no need to open it
	}
	f, err := s.openData(ctx, p, df, false)
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	pf, err := codec.OpenParquet(f, f.Size(), codec.ReadOptions{Allocator: s.readMem})
	if err != nil {
		return 0, false, s.badFile(p, df, err)
	}
	defer pf.Close()
	keep, o := selectRowGroups(sn.Filter, pf, part)
	if keep != nil && len(keep) == 0 {
		return 0, false, nil
	}
	if !o.Always() {
		return -1, true, nil
	}
	if keep == nil {
		return pf.Footer().Rows, true, nil
	}
	var n int64
	for _, i := range keep {
		n += pf.RowGroup(i).NumRows()
	}
	return n, true, nil
}

// filterFields are the columns a read of sn must decode besides out to
// evaluate its filter, in the snapshot's order.
func filterFields(sn *Snapshot, out *arrow.Schema) []arrow.Field {
	if sn.Filter == nil {
		return nil
	}
	var extra []arrow.Field
	for _, f := range sn.Schema.Fields() {
		if slices.Contains(sn.Filter.Columns(), f.Name) && len(out.FieldIndices(f.Name)) == 0 {
			extra = append(extra, f)
		}
	}
	return extra
}
