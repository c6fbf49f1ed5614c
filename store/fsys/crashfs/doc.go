// Package crashfs simulates a power loss under an fsys.FS, for tests.
//
// A process killed with SIGKILL leaves the operating system's page cache
// behind: everything it wrote is still there, synced or not, so a kill
// test cannot see a missing fsync. crashfs can. It wraps the FS of a local
// directory (an *fsys.Local, or any FS), passes every call through, and
// keeps beside it a model of what the disk would hold if the machine lost
// power at this instant. [FS.Crash] writes that durable image into a fresh
// directory, over which a new fsys.Local (and a new store) can be opened,
// as a rebooted server would find its disk.
//
// # The model
//
// It is POSIX's, as ext4 without its journal's luck gives it (the worst
// case a program may rely on):
//
//   - A file's content is durable only up to where it was last synced:
//     a create with fsys.SyncFull or fsys.SyncContent, a Writer's
//     DataSyncer.Sync, a Commit that is not fsys.SyncNone. What was
//     written after that is lost in the crash: with [TearEmpty] (the
//     default) the file comes back holding only its synced bytes (a file
//     never synced is empty, the "zero-length file" of a delayed
//     allocation), with [TearPrefix] a random prefix of the unsynced bytes
//     survives too, with [TearKeep] all of them (the lucky case),
//     [TearMixed] picks one of these per file.
//   - A name (a directory entry: a create, a Writer's link on Commit, a
//     rename over a name by Replace, a delete, a marker, a directory) is
//     durable only once its directory was synced after it was made: by
//     [FS.SyncDir], or by a call with fsys.SyncFull, which syncs the
//     directory itself. Until then the crash shows the directory's
//     previous durable entry for that name: nothing for a create, the old
//     object for a Replace, the object still there for a Delete. A sync of
//     a directory makes every entry in it durable, whoever made it.
//   - Directories are entries of their parent like any other. A directory
//     is reached after the crash only through durable entries: a file in a
//     directory whose own entry is not durable is lost with it.
//   - Hidden temp files of open Writers (".<hex>.<base>.tmp") are entries
//     too: a directory synced while a Writer is open keeps the temp, with
//     its synced content, after the crash (what sweep is for).
//
// The model follows what fsys.Local really syncs (store/fsys/local.go),
// not what its doc comments promise, because the point is to catch the
// gaps: Mkdir syncs the parent; a call that creates missing parent
// directories (every create does, mkdirAll) syncs each parent that gained
// an entry, and nothing for directories that existed already; a
// CreateExclusive of empty data with SyncFull syncs the directory; Delete
// of a missing name syncs nothing; DeleteAll syncs the parent of the tree;
// a Writer's Commit with SyncContent (or SyncNone) links without syncing
// the directory.
//
// # Concurrency and the cut
//
// The model changes when a wrapped call returns successfully, so a crash
// taken while a call is in flight shows that call as not having happened
// (which the real disk allows too: it had not returned). For the model to
// be faithful under concurrency, a call whose real effect another
// goroutine could observe before the model has it must not race a
// directory sync that would make that effect durable: crashfs lets the
// calls that sync a directory (SyncDir, every SyncFull call, Mkdir,
// DeleteAll, calls that create directories) run one at a time, while the
// calls that sync no directory run in parallel with each other. Reads are
// never held back. So the model equals the real disk's visible state
// whenever a directory is synced, and the durable image is exactly what
// the syncs made durable. Crash takes a consistent cut under the model's
// mutex and may be called at any time from any goroutine.
//
// One consequence: races inside fsys.Local between two callers that both
// create the same missing directory (one sees the other's directory before
// that caller has synced its parent) are serialized here and cannot be
// observed.
//
// # What is forwarded
//
// crashfs implements fsys.FS, fsys.Relaxed, fsys.Marker and
// fsys.PairStater, its Writers fsys.DataSyncer when the wrapped FS's
// Writers do, and Close (closing the wrapped FS), so that a store over it
// takes the same code paths as over fsys.Local. It does not implement
// fsys.ConditionalDeleter (fsys.Local does not either): wrapping an object
// store would change what the store does, and object stores are durable at
// every call anyway. Calls that fail change the model only as fsys.Local
// cleans up after a failure (a failed Commit leaves no temp); a call that
// fails after its visible effect (an I/O error of the directory sync)
// makes the model diverge, which [FS.Check] reports.
package crashfs
