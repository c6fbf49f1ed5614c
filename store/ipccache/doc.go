// Package ipccache is an optional cache of decoded data files as Arrow IPC,
// kept on a local disk outside the data directory (`quiver serve
// --cache-dir`). A hot read streams a cached file's IPC messages as they
// lie on disk — read into memory and checked, no Parquet decode, no
// re-encoding — where a cold read decodes Parquet.
//
// # Basics
//
// An entry is named by a [Key] the caller derives from the immutable
// identity of a committed file (its path, the SHA-256 of its commit record,
// its size and modification time, the schema it is read with): an entry is
// never updated, a changed file simply has another key. [Cache.Create]
// starts an entry, [Writer.Commit] publishes it (written to a hidden temp
// file, then renamed); [Cache.Get] opens one for reading. Entries are
// evicted least recently used when the cache passes its size, and survive
// restarts (the order of use is kept in the files' modification times).
//
// # Caveats
//
// The cache is never a source of truth. A missing, partial or corrupt
// entry is a miss: every entry carries a CRC-32C of its bytes, checked the
// first time a process opens it, and an entry that fails the check is
// deleted. Entries are not fsynced: after a crash the check finds what the
// disk lost.
//
// Entries are never memory-mapped: a message is read (pread) into a
// buffer of its own and checked against its own CRC-32C, kept in the
// index, on every read ([Entry.Batch]). A file changed under the server
// (truncated, rewritten) fails the read that meets it with ErrCorrupt and
// drops the entry: it cannot crash the process (as a truncated mapping
// would, with SIGBUS) nor hand on bytes other than those the index
// vouched for when the entry was first opened. The checksums protect
// against accidents, not against someone who can write the cache
// directory: they can write an entry whose checksums agree. The directory
// must be private to the server, like the data directory. Batches read
// from an entry own their memory (the buffers read) and outlive it.
// Schemas with dictionary-encoded fields are not cached (their IPC streams
// carry dictionary messages that a batch cannot be sent without).
//
// # Format
//
// One file per entry, "<key>.arrows":
//
//	"QVRIPC1\n"                                   magic, 8 bytes
//	schema message                                0xFFFFFFFF, int32 length, flatbuffer (padded to 8)
//	record batch messages                         0xFFFFFFFF, int32 length, flatbuffer (padded), body
//	index: one 40-byte row per batch              offset int64, meta length uint32, padded meta length uint32,
//	                                              body length int64, rows int64, CRC-32C uint32 of the
//	                                              message (framing to end of body), zero uint32 (little endian)
//	trailer (32 bytes)                            batches int64, rows int64, CRC-32C uint32 of every byte
//	                                              before it, version uint32 (2), "QVRIPCE\n"
package ipccache
