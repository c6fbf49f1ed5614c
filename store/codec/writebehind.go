package codec

import (
	"bytes"
	"hash"
	"io"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// hashAsideMin is the smallest write whose SHA-256 is computed beside the
// write (on another goroutine) rather than after it, and the smallest
// that may be written behind (see countingWriter).
const hashAsideMin = 256 << 10

// writeBehindQueue is how many writes may wait for the write-behind
// goroutine before a write blocks: more than the columns of most row
// groups, each of which reaches the file as one write.
const writeBehindQueue = 64

// countingWriter hashes and counts what reaches w and keeps w's first
// error.
//
// With behind set (the parallel column writer, whose row groups reach the
// file as one write per column chunk, from a buffer the encoder frees
// right after), a large write of a buffer that behind allocated returns
// at once: the buffer is hashed and written, in order, by a goroutine of
// the writer's own, while the encoder goes on with the next row group
// (writing 16 MiB into the page cache took a sixth of a one-file put's
// time, one core idle). The buffer's free is deferred until its write
// ended (countingAllocator.pin), so nothing can reuse it meanwhile. A
// small write is copied and written behind too; a large one of another
// buffer waits for those before it and is written at once. An error
// of a write behind is returned by a later Write, and by drain.
type countingWriter struct {
	w      io.Writer
	h      hash.Hash
	n      int64
	behind *countingAllocator

	queue   chan behindWrite // to the write-behind goroutine (nil: not started)
	wg      sync.WaitGroup
	pending atomic.Int32 // writes passed to it and not yet done
	queued  int          // writes passed to it, ever (for tests)

	mu      sync.Mutex // guards err and discard
	err     error
	discard bool
}

// firstErr is the first error of a write (behind or not).
func (c *countingWriter) firstErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *countingWriter) setErr(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	c.mu.Unlock()
}

func (c *countingWriter) discarding() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.discard
}

func (c *countingWriter) Write(b []byte) (int, error) {
	if c.discarding() {
		return len(b), nil
	}
	if err := c.firstErr(); err != nil {
		return 0, err
	}
	if c.behind != nil {
		// A large buffer of the encoder's is held until written; a
		// small write (a column chunk of a few KiB, the footer) is
		// copied if writes are behind, so that it does not wait for
		// them.
		w := behindWrite{b: b, pinned: len(b) >= hashAsideMin && c.behind.pin(b)}
		if w.pinned || (len(b) < hashAsideMin && c.pending.Load() > 0) {
			if !w.pinned {
				w.b = bytes.Clone(b)
			}
			if c.queue == nil {
				c.queue = make(chan behindWrite, writeBehindQueue)
				go c.writeBehind(c.queue)
			}
			c.wg.Add(1)
			c.pending.Add(1)
			c.queued++
			c.queue <- w
			c.n += int64(len(b))
			return len(b), nil
		}
	}
	c.wg.Wait() // (the writes before this one)
	if err := c.firstErr(); err != nil {
		return 0, err
	}
	n, err := c.write(b)
	c.n += int64(n)
	return n, err
}

// write hashes b and writes it to w.
func (c *countingWriter) write(b []byte) (int, error) {
	var n int
	var err error
	if len(b) >= hashAsideMin {
		// Hashed on another core while it is written. A write that
		// fails leaves the hash with bytes the file does not have, but
		// the error is kept and the file is never committed.
		hashed := make(chan struct{})
		go func() {
			c.h.Write(b)
			close(hashed)
		}()
		n, err = c.w.Write(b)
		<-hashed
	} else {
		n, err = c.w.Write(b)
		c.h.Write(b[:n])
	}
	if err == nil && n < len(b) {
		err = io.ErrShortWrite
	}
	if err != nil {
		c.setErr(err)
	}
	return n, err
}

// behindWrite is a write passed to the write-behind goroutine: a buffer
// of the encoder's (pinned) or a copy.
type behindWrite struct {
	b      []byte
	pinned bool
}

// writeBehind does the writes of q in order, each pinned buffer unpinned
// once written (or skipped after an error, or when discarding).
func (c *countingWriter) writeBehind(q <-chan behindWrite) {
	for w := range q {
		if c.firstErr() == nil && !c.discarding() {
			_, _ = c.write(w.b)
		}
		if w.pinned {
			c.behind.unpin(w.b)
		}
		c.pending.Add(-1)
		c.wg.Done()
	}
}

// drain waits for the writes behind and stops their goroutine; it
// returns the first write error. Writes after drain are synchronous
// until the next large one.
func (c *countingWriter) drain() error {
	c.wg.Wait()
	if c.queue != nil {
		close(c.queue)
		c.queue = nil
	}
	return c.firstErr()
}

// abandon drops what is not yet written and makes further writes no-ops;
// it returns once no write behind is running.
func (c *countingWriter) abandon() {
	c.mu.Lock()
	c.discard = true
	c.mu.Unlock()
	_ = c.drain()
}

// countingAllocator counts the bytes allocated and not yet freed. It also
// knows its live allocations of hashAsideMin bytes or more, so that a
// write behind may hold one (pin): its free waits for the write, and so
// does its reallocation.
type countingAllocator struct {
	mem memory.Allocator
	n   atomic.Int64

	mu       sync.Mutex
	unpinned *sync.Cond            // (lazily made)
	large    map[*byte]*largeAlloc // by its first byte
}

// largeAlloc is a live allocation of hashAsideMin bytes or more.
type largeAlloc struct {
	pins  int    // writes behind holding it
	freed []byte // Free came while pinned: done at the last unpin
}

func (c *countingAllocator) Allocate(size int) []byte {
	b := c.mem.Allocate(size)
	c.n.Add(int64(len(b)))
	c.track(b)
	return b
}

func (c *countingAllocator) Reallocate(size int, b []byte) []byte {
	if cap(b) >= hashAsideMin {
		c.untrack(b, true)
	}
	old := len(b)
	b = c.mem.Reallocate(size, b)
	c.n.Add(int64(len(b) - old))
	c.track(b)
	return b
}

func (c *countingAllocator) Free(b []byte) {
	if cap(b) >= hashAsideMin && c.untrack(b, false) {
		return // freed by the last unpin
	}
	c.n.Add(-int64(len(b)))
	c.mem.Free(b)
}

func (c *countingAllocator) track(b []byte) {
	if cap(b) < hashAsideMin {
		return
	}
	c.mu.Lock()
	if c.large == nil {
		c.large = map[*byte]*largeAlloc{}
	}
	c.large[unsafe.SliceData(b)] = &largeAlloc{}
	c.mu.Unlock()
}

// untrack forgets the allocation b. When a write behind holds it, a free
// (wait false) is deferred to the last unpin (reported true); a
// reallocation (wait true) waits for the writes.
func (c *countingAllocator) untrack(b []byte, wait bool) bool {
	p := unsafe.SliceData(b)
	c.mu.Lock()
	defer c.mu.Unlock()
	a := c.large[p]
	if a == nil {
		return false
	}
	if a.pins > 0 && !wait {
		a.freed = b
		return true
	}
	for a.pins > 0 {
		c.cond().Wait()
	}
	delete(c.large, p)
	return false
}

func (c *countingAllocator) cond() *sync.Cond {
	if c.unpinned == nil {
		c.unpinned = sync.NewCond(&c.mu)
	}
	return c.unpinned
}

// pin reports whether b starts a live large allocation of c, and then
// holds the allocation for a write behind until unpin.
func (c *countingAllocator) pin(b []byte) bool {
	p := unsafe.SliceData(b)
	c.mu.Lock()
	defer c.mu.Unlock()
	a := c.large[p]
	if a == nil || a.freed != nil {
		return false
	}
	a.pins++
	return true
}

// unpin ends a pin of b, doing a free that came meanwhile.
func (c *countingAllocator) unpin(b []byte) {
	p := unsafe.SliceData(b)
	c.mu.Lock()
	a := c.large[p]
	a.pins--
	var freed []byte
	if a.pins == 0 {
		if freed = a.freed; freed != nil {
			delete(c.large, p)
		}
		c.cond().Broadcast()
	}
	c.mu.Unlock()
	if freed != nil {
		c.n.Add(-int64(len(freed)))
		c.mem.Free(freed)
	}
}
