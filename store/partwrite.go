package store

import (
	"context"
	"runtime"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/util"

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
	rec    arrow.RecordBatch // its rows, once gathered (gatherParts)
}

// gatherChunkBytes bounds the rows gathered at once for the writes of one
// batch's partitions: a copy of that many bytes of the batch is alive on
// top of it while they are written.
var gatherChunkBytes int64 = 4 << 20 // (a variable for tests)

// writeParts gathers each part's rows and encodes them into its sink's
// file, on every core: the parts of one batch go to distinct files, whose
// writers share nothing but the (concurrency-safe) allocator and
// compressors. A file whose open row group has reached groupBytes of
// encoded pages ends it. Gathering and encoding a batch's partitions one
// after the other kept a partitioned put on one core, where a one-file
// put encodes its columns on all (docs/benchmarks.md).
//
// The parts' rows are gathered a chunk of parts at a time, up to
// gatherChunkBytes of rows, with codec.GatherRuns: one pass over each
// column for the chunk, where gathering part by part read the batch once
// per part, at random (docs/benchmarks.md).
//
// The gathered batches are allocated from mem (compute.GetAllocator(ctx)
// if nil) and freed as soon as the writes of their chunk return. A pool
// that handed the next chunk the last chunk's buffers would be safe: no
// encoder keeps a reference to its input past Write without taking an
// Arrow reference of it (TestWritePartsPooledBuffers). It was measured
// and not kept: the same CPU, and 11 MiB more peak RSS for what it holds
// (docs/benchmarks.md).
//
// The caller does the rest of the bookkeeping (sizes, limits, roll-over)
// once it returns; on an error the files are unusable and the put fails.
func writeParts(ctx context.Context, parts []partWrite, groupBytes int64, mem memory.Allocator) error {
	workers := runtime.GOMAXPROCS(0)
	for len(parts) > 0 {
		n, err := gatherParts(ctx, parts, workers, mem)
		if err != nil {
			return err
		}
		chunk := parts[:n]
		parts = parts[n:]
		err = par.ForEach(len(chunk), workers, func(i int) error {
			w := &chunk[i]
			rec := w.rec
			w.rec = nil
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
		if err != nil {
			for _, w := range parts {
				if w.rec != nil {
					w.rec.Release()
				}
			}
			return err
		}
	}
	return nil
}

// gatherParts sets the rec of the first parts (n of them, at least one)
// that share a batch and whose rows, not already one run of it, come to
// at most gatherChunkBytes: slices of one batch gathered by
// codec.GatherRuns, or of their batch for rows that are one run.
func gatherParts(ctx context.Context, parts []partWrite, workers int, mem memory.Allocator) (n int, err error) {
	data := parts[0].data
	var rowBytes int64
	if rows := data.NumRows(); rows > 0 {
		rowBytes = max(1, util.TotalRecordSize(data)/rows)
	}
	var runs [][]int32
	var gathered []int // parts whose rows are in runs
	bytes := int64(0)
	for n < len(parts) && parts[n].data == data {
		w := &parts[n]
		rec, shared := runOf(data, w.rows)
		if shared {
			w.rec = rec
			n++
			continue
		}
		b := int64(len(w.rows)) * rowBytes
		if len(runs) > 0 && bytes+b > gatherChunkBytes {
			break
		}
		bytes += b
		runs = append(runs, w.rows)
		gathered = append(gathered, n)
		n++
	}
	if len(runs) == 0 {
		return n, nil
	}
	all, err := codec.GatherRuns(ctx, data, runs, workers, mem)
	if err != nil {
		for _, w := range parts[:n] {
			if w.rec != nil {
				w.rec.Release()
				w.rec = nil
			}
		}
		return 0, err
	}
	defer all.Release()
	from := int64(0)
	for _, i := range gathered {
		to := from + int64(len(parts[i].rows))
		parts[i].rec = all.NewSlice(from, to)
		from = to
	}
	return n, nil
}

// runOf returns the rows idx (ascending) of data as a slice of it when
// they are one run (or none).
func runOf(data arrow.RecordBatch, idx []int32) (arrow.RecordBatch, bool) {
	switch {
	case len(idx) == 0:
		return data.NewSlice(0, 0), true
	case int(idx[len(idx)-1]-idx[0]) == len(idx)-1:
		return data.NewSlice(int64(idx[0]), int64(idx[len(idx)-1])+1), true
	}
	return nil, false
}
