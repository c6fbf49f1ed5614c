package store

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestSpillRefusesAmplification: a partitioned write whose blocks would
// each carry far more than their rows — a batch's whole dictionary in
// every partition's block (red team round 45's p45_01: 1 GB spilled for 2
// MiB sent), or a wide schema's metadata for a row or two (p45_02) — is
// encoded as it comes instead of spilled: the spill writes nothing, and
// every row is written once, in its partition, in order.
func TestSpillRefusesAmplification(t *testing.T) {
	for _, tc := range []struct {
		name string
		sc   *arrow.Schema
		make func(b *array.RecordBuilder, id int64)
	}{
		{"dictionary", arrow.NewSchema([]arrow.Field{
			{Name: "id", Type: arrow.PrimitiveTypes.Int64},
			{Name: "k", Type: arrow.PrimitiveTypes.Int64},
			{Name: "d", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}},
		}, nil), func(b *array.RecordBuilder, id int64) {
			if err := b.Field(2).(*array.BinaryDictionaryBuilder).AppendString(fmt.Sprintf("%06d-%094d", id%20000, id)); err != nil {
				t.Fatal(err)
			}
		}},
		{"wide", wideSchema(300), func(b *array.RecordBuilder, id int64) {
			for i := 2; i < b.Schema().NumFields(); i++ {
				b.Field(i).(*array.Int8Builder).Append(int8(id))
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var written int64
			spillHeldHook = func(_, _, w int64) { written = w }
			defer func() { spillHeldHook = nil }()
			const batches, rows, parts = 3, 4000, 200
			rdr := array.ReaderFromIter(tc.sc, func(yield func(arrow.RecordBatch, error) bool) {
				id := int64(0)
				for range batches {
					b := array.NewRecordBuilder(memory.DefaultAllocator, tc.sc)
					for range rows {
						b.Field(0).(*array.Int64Builder).Append(id)
						b.Field(1).(*array.Int64Builder).Append(id % parts)
						tc.make(b, id)
						id++
					}
					rec := b.NewRecordBatch()
					b.Release()
					if !yield(rec, nil) {
						return
					}
				}
			})
			s, _ := newTestStore(t)
			put(t, s, ModeWrite, []string{"amp"}, rdr, PutOptions{PartitionBy: []string{"k"}})
			if written > 8<<20 {
				t.Errorf("the spill wrote %d bytes for %d rows", written, batches*rows)
			}
			checkPartitioned(t, s, []string{"amp"}, batches*rows, func(id int64) int64 { return id % parts })
			if n := s.PutMemory(); n != 0 {
				t.Errorf("put memory after the put: %d", n)
			}
		})
	}
}

// wideSchema is id, k and n int8 columns.
func wideSchema(n int) *arrow.Schema {
	fs := []arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "k", Type: arrow.PrimitiveTypes.Int64}}
	for i := range n {
		fs = append(fs, arrow.Field{Name: fmt.Sprintf("c%d", i), Type: arrow.PrimitiveTypes.Int8})
	}
	return arrow.NewSchema(fs, nil)
}

// TestSpillFileSizeLimitIsFull: a spill file that reaches the server's
// file size limit (EFBIG; RLIMIT_FSIZE) fails the put as a full spill
// directory does, the client told so (red team round 45's p45_03: an
// internal error).
func TestSpillFileSizeLimitIsFull(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT, syscall.EFBIG} {
		if err := spillFail(fmt.Errorf("write spill: %w", errno)); !errors.Is(err, ErrSpillFull) || !errors.Is(err, errno) {
			t.Errorf("%v: %v, want ErrSpillFull wrapping it", errno, err)
		}
	}
	if err := spillFail(syscall.EIO); errors.Is(err, ErrSpillFull) {
		t.Errorf("EIO: %v, want no ErrSpillFull", err)
	}
}
