// Package poison overwrites memory that has been freed, so that a use
// after free (a zero-copy string or slice kept past its buffer's release)
// reads as garbage at once instead of when the pool hands the buffer out
// again. The store's read pool and the IPC cache's message pool call it.
package poison

import (
	"os"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// On is whether freed memory is poisoned: in test binaries, and where
// QUIVER_POISON_FREED=1 (the servers `make test` starts).
var On = testing.Testing() || os.Getenv("QUIVER_POISON_FREED") == "1"

// Byte is what poisoned memory holds.
const Byte = 0xA5

// Fill overwrites b up to its capacity with Byte.
func Fill(b []byte) {
	b = b[:cap(b)]
	for i := range b {
		b[i] = Byte
	}
}

// Allocator wraps an allocator so that every buffer it frees is poisoned
// (Fill), and a reallocation always moves (the old buffer freed, so
// poisoned): a test that writes through it finds any use of a buffer past
// its release.
type Allocator struct{ memory.Allocator }

// Free poisons b, then frees it.
func (a Allocator) Free(b []byte) {
	Fill(b)
	a.Allocator.Free(b)
}

// Reallocate moves b into a new buffer of size bytes and frees b.
func (a Allocator) Reallocate(size int, b []byte) []byte {
	nb := a.Allocate(size)
	copy(nb, b)
	a.Free(b)
	return nb
}
