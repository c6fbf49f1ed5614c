package arrowtest

import (
	"sync"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Peak is a memory.Allocator over Mem that records the bytes it holds and
// the most it held at once. It is safe for concurrent use.
type Peak struct {
	Mem       memory.Allocator // the allocator it passes to (required)
	mu        sync.Mutex
	cur, peak int64
}

// NewPeak returns a Peak over a new Go allocator.
func NewPeak() *Peak { return &Peak{Mem: memory.NewGoAllocator()} }

func (p *Peak) add(n int) {
	p.mu.Lock()
	p.cur += int64(n)
	p.peak = max(p.peak, p.cur)
	p.mu.Unlock()
}

// Allocate implements memory.Allocator.
func (p *Peak) Allocate(size int) []byte {
	b := p.Mem.Allocate(size)
	p.add(len(b))
	return b
}

// Reallocate implements memory.Allocator.
func (p *Peak) Reallocate(size int, b []byte) []byte {
	old := len(b)
	b = p.Mem.Reallocate(size, b)
	p.add(len(b) - old)
	return b
}

// Free implements memory.Allocator.
func (p *Peak) Free(b []byte) {
	p.add(-len(b))
	p.Mem.Free(b)
}

// Max is the most bytes held at once since the start or ResetMax.
func (p *Peak) Max() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.peak
}

// ResetMax starts a new measure of the peak from the bytes held now.
func (p *Peak) ResetMax() {
	p.mu.Lock()
	p.peak = p.cur
	p.mu.Unlock()
}
