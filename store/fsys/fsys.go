package fsys

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"time"
)

// Errors every implementation returns (wrapped or not) so that callers can
// act on them with errors.Is.
var (
	// ErrExist: the name is taken (an exclusive create or Mkdir lost).
	// It is fs.ErrExist, so os-level errors match too.
	ErrExist = fs.ErrExist
	// ErrNotExist: no object by that name. It is fs.ErrNotExist.
	ErrNotExist = fs.ErrNotExist
	// ErrPrecondition: Replace found another token than the one it was
	// given (someone else replaced the object meanwhile).
	ErrPrecondition = errors.New("fsys: precondition failed (object changed)")
	// ErrUnsafePath: a name that is not a clean relative path, or whose
	// resolution would leave the root or pass through a symbolic link.
	// Nothing was read or written.
	ErrUnsafePath = errors.New("fsys: unsafe path")
	// ErrNotRegular: Open or ReadFile found a directory, FIFO, socket or
	// device where it wanted a file (never opened for reading).
	ErrNotRegular = errors.New("fsys: not a regular file")
	// ErrTooLarge: ReadFile found an object larger than MaxReadFile.
	// Nothing of it was read into memory.
	ErrTooLarge = errors.New("fsys: object too large to read whole")
	// ErrUnavailable: the storage service did not answer (connection
	// refused or reset, a timeout) or answered that it is failing (HTTP
	// 5xx, SlowDown). What the request did is unknown; a retry may
	// succeed.
	ErrUnavailable = errors.New("fsys: storage unavailable")
	// ErrDenied: the storage service refused the server's request for
	// who sent it or where (credentials rejected, no such bucket), never
	// for what it asked. Nothing was read or written; it lasts until an
	// operator mends the server's configuration. s3fs errors of this
	// kind match ErrUnavailable too.
	ErrDenied = errors.New("fsys: storage refused the server's credentials or configuration")
	// ErrStorage: an error the storage service answered (object storage:
	// an HTTP error status), whatever its class. Callers that know the
	// class test for it first (ErrNotExist, ErrPrecondition, ErrDenied,
	// ErrUnavailable); what is left is an answer nobody expected.
	ErrStorage = errors.New("fsys: the storage service answered an error")
)

// MaxReadFile bounds what ReadFile reads: metadata (manifests, records,
// log segments, locks) is far smaller, so a larger object is damage or an
// attack (a sparse file of gigabytes costs no disk but would cost that
// much memory), refused before it is read.
const MaxReadFile = 64 << 20

// Entry is one name found by List or Stat.
type Entry struct {
	// Name is the last element of the name (List) or the full name (Stat).
	Name string
	// Dir is true for a directory (on object stores: a common prefix).
	Dir bool
	// Size in bytes (0 for directories).
	Size int64
	// ModTime is the last modification (object stores: last write).
	ModTime time.Time
	// Changed is the last change of the entry's status on a local disk
	// (ctime: any write, rename into it, or setting of ModTime moves it,
	// and it cannot be set back); zero on object stores. A cache keyed on
	// it sees a change that set ModTime back to an older time.
	Changed time.Time
	// Link is true for a symbolic link found by List on a local disk. It
	// is never followed: every other operation on its name, or on a name
	// below it, fails with ErrUnsafePath (Delete and Mkdir included), and
	// DeleteAll of a directory holding it removes the link itself, never
	// its target. Object stores have no links and leave it false.
	Link bool
	// Special is true for what is neither a regular file, a directory nor
	// a link (a FIFO, socket or device; local disks only). Such entries
	// are never opened (Open and ReadFile refuse them) and never removed
	// by the store: they are reported.
	Special bool
}

// Token identifies one state of a small object for Replace: an ETag on
// object stores, a content hash on local disks. The empty Token means "no
// object".
type Token string

// FS is the storage of one data directory: the only way the store reaches
// disk or bucket. Names are slash-separated, relative to the root, clean
// (no "", ".", "..", no leading or trailing slash, no empty element) and
// never follow links; an implementation refuses anything else (see
// ValidName) with ErrUnsafePath before touching storage. Every method takes ctx first and
// stops when it is done.
//
// Directories are implicit: creating an object creates its parents
// (on local disks, as real directories; on object stores, nothing). Mkdir
// is the one operation that claims a directory name by itself.
//
// Durability: everything a method returned nil for survives a crash of
// the process or the machine (local disks: file and directory synced).
//
// Implementations must pass fsystest.Run (store/fsys/fsystest).
type FS interface {
	// CreateExclusive creates name holding data if no object of that name
	// exists, else fails with ErrExist. It is atomic against every other
	// client of the same storage (O_EXCL/link on local disks and NFS,
	// If-None-Match: * on S3): of N concurrent calls exactly one succeeds.
	// Readers never see the object partly written.
	CreateExclusive(ctx context.Context, name string, data []byte) error

	// Create starts a streaming write of an object that stays invisible
	// until Commit returns nil. See Writer.
	Create(ctx context.Context, name string) (Writer, error)

	// ReadFile reads a whole object (meant for small ones: manifests,
	// records) and returns its Token for Replace. An object larger than
	// MaxReadFile is refused with ErrTooLarge.
	ReadFile(ctx context.Context, name string) ([]byte, Token, error)

	// Replace atomically replaces name with data if its current Token is
	// ifMatch (the empty Token: if name does not exist), else fails with
	// ErrPrecondition. Readers see the old or the new content, never a
	// mix. On object stores the check is the service's (If-Match); on
	// local disks it is a read-compare before the rename, atomic only
	// among writers that hold the object's lock (the manifest lock) — the
	// same guarantee pyrosome relies on. (With the empty Token Local
	// creates by link(2), atomic against everyone.)
	Replace(ctx context.Context, name string, data []byte, ifMatch Token) error

	// Open opens an object for reading: random access (Parquet footers
	// and column chunks by ranged reads) and sequential reads.
	Open(ctx context.Context, name string) (File, error)

	// Stat describes one object or directory; ErrNotExist if absent.
	Stat(ctx context.Context, name string) (Entry, error)

	// List lists the objects and directories directly under dir ("" is
	// the root), sorted by name; an empty directory lists as empty. When
	// nothing exists under dir it fails with ErrNotExist (object stores
	// cannot tell an empty directory from a missing one and answer
	// ErrNotExist for both, so callers treat the two alike). Hidden
	// in-progress writes (Create not yet committed) may be listed; their
	// names start with "." and end in ".tmp".
	List(ctx context.Context, dir string) ([]Entry, error)

	// Mkdir claims a directory name: it fails with ErrExist if the
	// directory exists (atomic mkdir on local disks, which pyrosome's
	// writers use to claim a version; an If-None-Match marker object on
	// S3). Parents are created as needed.
	Mkdir(ctx context.Context, name string) error

	// Delete removes one object. Deleting a missing object is not an
	// error. On local disks an empty directory may be deleted too.
	Delete(ctx context.Context, name string) error

	// DeleteAll removes a directory (prefix) and everything under it.
	// A missing one is not an error.
	DeleteAll(ctx context.Context, dir string) error
}

// ConditionalDeleter is implemented by storage that can delete an object
// only in a known state (S3: DeleteObject with If-Match). The store
// releases its manifest lock with it where it can, so that a lock taken
// over between the release's read and its delete is never removed.
type ConditionalDeleter interface {
	// DeleteIfMatch deletes name only if its Token is ifMatch, else fails
	// with ErrPrecondition; a missing object is not an error. A service
	// that ignores the condition deletes unconditionally, as Delete does.
	DeleteIfMatch(ctx context.Context, name string, ifMatch Token) error
}

// Writer is an object being written by FS.Create. Exactly one of Commit
// or Abort must be called (Abort after a failed Commit is allowed and
// cleans up); data is neither visible nor durable until Commit returns
// nil.
type Writer interface {
	io.Writer
	// Commit makes the object visible at its name, complete and durable,
	// or fails with ErrExist if an object of that name exists already (it
	// never replaces one). Local disks: fsync, make read-only, link, fsync
	// the directory. S3: complete the multipart upload with
	// If-None-Match: *.
	Commit(ctx context.Context) error
	// Abort discards what was written. It is a no-op after a successful
	// Commit.
	Abort() error
}

// File is an object open for reading.
type File interface {
	io.Reader
	io.ReaderAt
	io.Seeker
	io.Closer
	// Size is the object's size when it was opened.
	Size() int64
}

// Stamper is implemented by Files that can tell, for the price of opening
// them, whether their content may have changed since an earlier open:
// Stamp changes whenever the object's content or metadata do (Local: its
// inode, change time and size). Readers key what they derive from an
// immutable file's bytes (a parsed footer) by it.
type Stamper interface {
	Stamp() string
}
