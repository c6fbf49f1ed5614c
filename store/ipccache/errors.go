package ipccache

import "errors"

var (
	// ErrUnsupported: the schema cannot be cached (it has dictionary
	// fields).
	ErrUnsupported = errors.New("ipccache: schema not cacheable")
	// ErrBusy: the entry exists already or another writer is filling it.
	ErrBusy = errors.New("ipccache: entry exists or is being filled")
	// ErrTooLarge: the entry would not fit in the cache.
	ErrTooLarge = errors.New("ipccache: entry larger than the cache allows")
	// ErrLocked: another process uses the cache directory.
	ErrLocked = errors.New("ipccache: cache directory in use by another process")
	// ErrCorrupt: an entry does not parse or fails its checksum; it is
	// deleted and reported as a miss.
	ErrCorrupt = errors.New("ipccache: corrupt entry")
)
