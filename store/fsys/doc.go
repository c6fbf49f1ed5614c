// Package fsys is the storage under Quiver's store: one small interface,
// [FS], with a few operations whose guarantees are written in their doc
// comments (exclusive create, compare-and-swap replace, streaming create
// visible only when complete, listing, ranged reads, delete), and its
// implementations:
//
//   - [Local]: a directory on a local or NFS file system. It owns the
//     beneath-the-root guard: no name is ever resolved through a symbolic
//     link or outside the root (openat2 with RESOLVE_BENEATH and
//     RESOLVE_NO_SYMLINKS where the kernel has it, a per-component check
//     elsewhere).
//   - faultfs (store/fsys/faultfs): a wrapper that injects errors, for tests.
//   - S3 (store/fsys/s3fs): S3-compatible object storage with conditional
//     writes.
//
// Every implementation passes the same conformance suite,
// store/fsys/fsystest, which includes the concurrency guarantees (of N
// goroutines creating one name exclusively, exactly one wins).
//
// The package knows nothing of profiles, versions or Parquet.
package fsys
