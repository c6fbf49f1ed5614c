package store

import (
	"errors"
	"fmt"

	"github.com/quiverdb/quiver/store/codec"
)

// Sentinel errors. Callers test for them with errors.Is; the flightserver maps
// them to gRPC status codes. Messages built around them name profiles by their
// keys, never by a server path.
var (
	// ErrInvalidKey: keys that are empty, hidden, contain separators or
	// characters that cannot name a directory, collide with the layout's
	// own names, or resolve outside the data dir.
	ErrInvalidKey = errors.New("store: invalid key")
	// ErrNotFound: no profile with these keys.
	ErrNotFound = errors.New("store: profile not found")
	// ErrVersionNotFound: the profile exists but not the requested version
	// (or a pinned file of it: retention removed it).
	ErrVersionNotFound = errors.New("store: version not found")
	// ErrNestedProfile: a profile may not be created inside or above another.
	ErrNestedProfile = errors.New("store: nested profile")
	// ErrSchemaMismatch: an append's columns or types do not fit the version
	// (the codec's sentinel).
	ErrSchemaMismatch = codec.ErrSchemaMismatch
	// ErrInvalidArgument: a bad option or bad data (partition column,
	// filter, column name, nulls in a non-nullable column…; the codec's
	// sentinel).
	ErrInvalidArgument = codec.ErrInvalid
	// ErrFormatMismatch: parquet and CSV mixed in one profile, or a file
	// another writer put in a version whose values do not fit the
	// version's column types (its first file's).
	ErrFormatMismatch = errors.New("store: format mismatch")
	// ErrLockTimeout: the manifest lock was held by someone else for longer
	// than the lock timeout.
	ErrLockTimeout = errors.New("store: manifest lock timeout")
	// ErrTooLarge: a put exceeded a configured limit (size, memory).
	ErrTooLarge = errors.New("store: put too large")
	// ErrBadStream: the put's input stream failed (a malformed or
	// inconsistent stream, or the client went away); nothing was committed.
	ErrBadStream = errors.New("store: the put's stream failed")
	// ErrDataLoss: committed data is not as its commit record says (a file
	// missing, of the wrong size, or with the wrong hash). A read never
	// silently returns fewer rows.
	ErrDataLoss = errors.New("store: committed data lost or altered")
	// ErrUnavailable: the commit could not be completed for now (the
	// profile changed too often while the put retried, or the manifest could
	// not be moved); the put may or may not have committed — retry it with
	// the same request id.
	ErrUnavailable = errors.New("store: commit unavailable")
	// ErrCacheChanged: an IPC cache entry a read was streaming changed on
	// disk (truncated, rewritten) under it. The read fails; the entry is
	// dropped, so the read can be retried (it decodes the file).
	ErrCacheChanged = errors.New("store: IPC cache entry changed on disk during the read; retry")
	// ErrSpillFull: the spill directory (WithSpillDir; the data dir by
	// default) ran out of space while a partitioned write spilled its
	// rows, or its spill file reached the file size limit; nothing was
	// committed. It wraps the ENOSPC, EDQUOT or EFBIG.
	ErrSpillFull = errors.New("store: the spill directory is full")
)

// CorruptionError reports on-disk state that does not parse: a manifest,
// commit log segment or version file. Path is relative to the data
// directory.
type CorruptionError struct {
	Path string
	Err  error
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("store: corrupt %s: %v", e.Path, e.Err)
}

func (e *CorruptionError) Unwrap() error { return e.Err }

// PanicError is a panic inside the store (a bug) turned into the error of
// the operation that hit it, after that operation's cleanup ran: the
// caller logs it with its stack.
type PanicError struct {
	Profile string // the profile being written
	Value   any    // what was passed to panic
	Stack   []byte // the panicking goroutine's stack
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("store: %s: panic (a server bug): %v", e.Profile, e.Value)
}
