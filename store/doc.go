// Package store is Quiver's on-disk format: a versioned, append-only store of
// Parquet (or CSV) files laid out exactly as the Python library pyrosome lays
// them out, with Quiver's extensions for lineage and audit on top.
//
// # Layout
//
//	<data-dir>/
//	└── sales/orders/                 profile for keys ("sales","orders")
//	    ├── manifest.json             {"latest_data_dir": "v1"}
//	    ├── manifest.json.write_lock  short lock (exclusive create): host, pid, time
//	    ├── v0/
//	    │   ├── 0.parquet             written by Write
//	    │   ├── 1.parquet             added by Append
//	    │   ├── .1.parquet.claim      index 1 is taken (never deleted)
//	    │   ├── .version.json         frozen schema, partition columns, schema version
//	    │   ├── .0.commit.json        commit record of index 0
//	    │   └── .1.commit.json        commit record of index 1
//	    └── v1/
//	        └── region=eu/0.parquet   a partitioned version (hive directories)
//
// docs/format.md specifies the format in prose; this package is its only
// writer.
//
// # Basics
//
// A [Store] is opened on a data directory. [Store.Put] streams an
// [array.RecordReader] into either a new version ([ModeWrite]) or a new part
// file of the latest version ([ModeAppend]); batches go one at a time into a
// Parquet writer on a hidden temp file, so memory does not grow with the data.
// A partitioned write holds its rows, grouped by partition, in a local file
// with no name (spill.go), and encodes a partition's rows as a row group of
// its file each time enough of them have come, the rest partition after
// partition once the client has sent them all.
// Part files become visible by rename once complete (at a version's root, the
// pyrosome rule) or once the commit record that lists them exists (under
// partition directories). [Store.Read] streams a version back, pruning
// partitions before any file is opened and projecting columns.
//
// # Caveats
//
// Concurrency safety between processes rests on exclusive file creation
// (O_EXCL or link) and atomic mkdir and rename; the store keeps no in-memory
// state that other processes would need. Readers never take a lock. A process
// killed while holding the manifest lock leaves it behind; writers wait up to
// the lock timeout and the lock can be broken by an explicit admin action
// ([Store.BreakLock]).
package store
