package store

import (
	"sync/atomic"

	"github.com/quiverdb/quiver/store/fsys"
)

// memBudget is the store-wide budget of memory that the open Parquet
// writers of all puts buffer (a row group is built in memory before it is
// written). Puts report what they hold; over budget, a put flushes its
// fullest writers early.
type memBudget struct {
	limit int64
	used  atomic.Int64
}

func newMemBudget(limit int64) *memBudget { return &memBudget{limit: limit} }

// adjust adds delta (possibly negative) and returns it, so callers can
// keep count of what they hold.
func (b *memBudget) adjust(delta int64) int64 {
	b.used.Add(delta)
	return delta
}

// release returns what a finished put held.
func (b *memBudget) release(n int64) { b.used.Add(-n) }

// over reports whether the writers hold more than the budget.
func (b *memBudget) over() bool { return b.used.Load() > b.limit }

// PutMemory is the memory the open writers of all puts hold now (for
// metrics).
func (s *Store) PutMemory() int64 { return s.budget.used.Load() }

// writerMemory is what a storage writer buffers of its own (an S3
// multipart upload: the part filling and the one uploading), charged to
// the budget with the encoder's; 0 for writers that write through (local
// files).
func writerMemory(w fsys.Writer) int64 {
	if b, ok := w.(interface{ Buffered() int64 }); ok {
		return b.Buffered()
	}
	return 0
}
