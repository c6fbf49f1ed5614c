package store

import (
	"math/bits"
	"sync"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// poolAllocator is the store's default Arrow allocator: buffers of 4 KiB
// and more come from per-size-class pools and go back to them when Arrow
// frees them. A read allocates several times the bytes it yields (each
// batch's buffers, grown by doubling as values are decoded); without the
// pools every one of them is a fresh, zeroed Go allocation that the
// garbage collector must then find. Memory is zeroed when handed out, as
// Go's allocator does.
type poolAllocator struct {
	pools [maxPoolClass + 1]sync.Pool // of *[]byte
	// holders are spare *[]byte boxes, so that returning a buffer to its
	// pool allocates nothing.
	holders sync.Pool
}

const (
	minPoolClass = 12 // 4 KiB
	maxPoolClass = 28 // 256 MiB; larger buffers are not pooled
)

func newPoolAllocator() *poolAllocator { return &poolAllocator{} }

// class is the size class (log2 of the capacity) of a request.
func class(size int) int {
	if size <= 1<<minPoolClass {
		return minPoolClass
	}
	return bits.Len(uint(size - 1))
}

// Allocate returns size zeroed bytes.
func (a *poolAllocator) Allocate(size int) []byte {
	if size < 1<<minPoolClass {
		return memory.DefaultAllocator.Allocate(size)
	}
	c := class(size)
	if c > maxPoolClass {
		return memory.DefaultAllocator.Allocate(size)
	}
	if p, _ := a.pools[c].Get().(*[]byte); p != nil {
		b := (*p)[:size]
		*p = nil
		a.holders.Put(p)
		clear(b)
		return b
	}
	return make([]byte, size, 1<<c)
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

// Free returns a pooled buffer to its pool.
func (a *poolAllocator) Free(b []byte) {
	if !pooled(b) {
		return
	}
	h, _ := a.holders.Get().(*[]byte)
	if h == nil {
		h = new([]byte)
	}
	*h = b[:0]
	a.pools[bits.Len(uint(cap(b)))-1].Put(h)
}

// pooled reports whether b came from a pool: its capacity is a size class.
func pooled(b []byte) bool {
	c := cap(b)
	return c >= 1<<minPoolClass && c <= 1<<maxPoolClass && c&(c-1) == 0
}
