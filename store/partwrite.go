package store

import (
	"context"
	"runtime"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/quiverdb/quiver/internal/par"
	"github.com/quiverdb/quiver/store/codec"
)

// partWrite is one partition's rows of a split batch, to be written to
// its sink's open file.
type partWrite struct {
	k      *sink
	data   arrow.RecordBatch // the batch without its partition columns
	rows   []int32           // the partition's rows of data, ascending
	before int64             // the file's size before the write
}

// writeParts gathers each part's rows and encodes them into its sink's
// file, on every core: the parts of one batch go to distinct files, whose
// writers share nothing but the (concurrency-safe) allocator and
// compressors. A file whose open row group has reached groupBytes of
// encoded pages ends it. Gathering and encoding a batch's partitions one
// after the other kept a partitioned put on one core, where a one-file
// put encodes its columns on all (docs/benchmarks.md).
//
// The caller does the rest of the bookkeeping (sizes, limits, roll-over)
// once it returns; on an error the files are unusable and the put fails.
func writeParts(ctx context.Context, parts []partWrite, groupBytes int64) error {
	return par.ForEach(len(parts), runtime.GOMAXPROCS(0), func(i int) error {
		w := &parts[i]
		rec, _, err := codec.TakeRows(ctx, w.data, w.rows)
		if err != nil {
			return err
		}
		defer rec.Release()
		w.before = w.k.fw.Size()
		if err := w.k.fw.Write(rec); err != nil {
			return err
		}
		if w.k.fw.RowGroupBytes() >= groupBytes {
			return w.k.fw.EndRowGroup()
		}
		return nil
	})
}
