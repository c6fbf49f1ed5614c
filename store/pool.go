package store

import (
	"math/bits"
	"sync"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiverdb/quiver/internal/poison"
)

// poolAllocator is the store's default Arrow allocator for reads: buffers
// of 4 KiB and more are kept when Arrow frees them, by size class, and
// handed out again. A read allocates several times the bytes it yields
// (each batch's buffers, grown by doubling as values are decoded);
// without the pool every one of them is a fresh, zeroed Go allocation
// that the garbage collector must then find. Classes are a quarter of a
// power of two apart (a buffer wastes at most a fifth of itself). The
// pool keeps at most maxHeld bytes of free buffers (a sync.Pool would keep
// a garbage collection cycle's worth, and the collector sizes the heap by
// what is live). Memory is zeroed when handed out, as Go's allocator does.
type poolAllocator struct {
	mu      sync.Mutex
	free    [numClasses][][]byte
	held    int
	maxHeld int
}

// defaultPoolHeld is the free memory the read pool keeps.
const defaultPoolHeld = 32 << 20

const (
	minPoolShift = 12 // 4 KiB: smaller buffers are not pooled
	maxPoolShift = 28 // 256 MiB: larger buffers are not pooled
	numClasses   = (maxPoolShift-minPoolShift)*4 + 1
)

func newPoolAllocator() *poolAllocator { return &poolAllocator{maxHeld: defaultPoolHeld} }

// class returns the size class of a request of size bytes (4 KiB < size
// <= 256 MiB): its index and capacity.
func class(size int) (int, int) {
	if size <= 1<<minPoolShift {
		return 0, 1 << minPoolShift
	}
	k := bits.Len(uint(size-1)) - 1 // 2^k < size <= 2^(k+1)
	step := 1 << (k - 2)
	q := (size - 1<<k + step - 1) / step // 1..4
	return (k-minPoolShift)*4 + q, 1<<k + q*step
}

// Allocate returns size zeroed bytes.
func (a *poolAllocator) Allocate(size int) []byte {
	b, reused := a.take(size)
	if reused {
		clear(b)
	}
	return b
}

// AllocateUnzeroed returns size bytes whose contents are undefined (a
// reused buffer's bytes are not cleared), for memory the caller overwrites
// whole before reading it: Parquet page buffers (codec.UnzeroedAllocator).
func (a *poolAllocator) AllocateUnzeroed(size int) []byte {
	b, _ := a.take(size)
	return b
}

// take returns size bytes: a free buffer of their class (reused), or new
// zeroed memory.
func (a *poolAllocator) take(size int) (b []byte, reused bool) {
	if size < 1<<minPoolShift || size > 1<<maxPoolShift {
		return memory.DefaultAllocator.Allocate(size), false
	}
	c, capacity := class(size)
	a.mu.Lock()
	if n := len(a.free[c]); n > 0 {
		b := a.free[c][n-1][:size]
		a.free[c][n-1] = nil
		a.free[c] = a.free[c][:n-1]
		a.held -= cap(b)
		a.mu.Unlock()
		return b, true
	}
	a.mu.Unlock()
	return make([]byte, size, capacity), false
}

// ReallocateUnzeroed is Reallocate without clearing the bytes added.
func (a *poolAllocator) ReallocateUnzeroed(size int, b []byte) []byte {
	if size <= cap(b) && pooled(b) {
		return b[:size]
	}
	nb := a.AllocateUnzeroed(size)
	copy(nb, b)
	a.Free(b)
	return nb
}

// Reallocate grows (or shrinks) b to size, in place when its capacity
// allows, keeping its contents; new bytes are zero.
func (a *poolAllocator) Reallocate(size int, b []byte) []byte {
	if size <= cap(b) && pooled(b) {
		old := len(b)
		b = b[:size]
		if size > old {
			clear(b[old:])
		}
		return b
	}
	nb := a.Allocate(size)
	copy(nb, b)
	a.Free(b)
	return nb
}

// Free returns a buffer whose capacity is a size class to its pool.
func (a *poolAllocator) Free(b []byte) {
	if poison.On {
		poison.Fill(b)
	}
	if !pooled(b) {
		return
	}
	c, _ := class(cap(b))
	a.mu.Lock()
	if a.held+cap(b) <= a.maxHeld {
		a.free[c] = append(a.free[c], b[:0])
		a.held += cap(b)
	}
	a.mu.Unlock()
}

// pooled reports whether b's capacity is a size class (any such buffer
// may serve a request of its class, wherever it came from).
func pooled(b []byte) bool {
	n := cap(b)
	if n < 1<<minPoolShift || n > 1<<maxPoolShift {
		return false
	}
	_, capacity := class(n)
	return capacity == n
}
