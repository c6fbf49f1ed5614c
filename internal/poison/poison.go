// Package poison overwrites memory that has been freed, so that a use
// after free (a zero-copy string or slice kept past its buffer's release)
// reads as garbage at once instead of when the pool hands the buffer out
// again. The store's read pool and the IPC cache's message pool call it.
package poison

import (
	"os"
	"testing"
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
