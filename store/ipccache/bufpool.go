package ipccache

import (
	"math/bits"
	"sync"

	"github.com/quiverdb/quiver/internal/poison"
)

// Message buffers of BatchPooled come from pools by power-of-two size
// class (64 KiB to 256 MiB): a hot read streams a gigabyte of messages,
// and fresh buffers would each be zeroed by Go and then collected.
const (
	minBufShift = 16
	maxBufShift = 28
)

var bufPools [maxBufShift - minBufShift + 1]sync.Pool

// getBuf returns a buffer of n bytes whose contents are undefined (the
// caller overwrites all of them).
func getBuf(n int) []byte {
	if n <= 0 {
		return nil
	}
	c := bufClass(n)
	if c < 0 {
		return make([]byte, n)
	}
	if p, ok := bufPools[c].Get().(*[]byte); ok {
		return (*p)[:n]
	}
	return make([]byte, n, 1<<(c+minBufShift))
}

// putBuf returns a buffer of getBuf to its pool.
func putBuf(b []byte) {
	if poison.On {
		poison.Fill(b) // see internal/poison
	}
	c := bufClass(cap(b))
	if c < 0 || cap(b) != 1<<(c+minBufShift) {
		return
	}
	b = b[:0]
	bufPools[c].Put(&b)
}

// bufClass is the class of a buffer of n bytes (-1: not pooled).
func bufClass(n int) int {
	if n <= 1<<minBufShift/2 || n > 1<<maxBufShift {
		return -1
	}
	k := bits.Len(uint(n - 1)) // 2^(k-1) < n <= 2^k
	return max(k, minBufShift) - minBufShift
}
