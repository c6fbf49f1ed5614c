// Package maint is the maintenance of a Quiver store, on top of the core's
// one loader (store.Inspect) and its commit protocol:
//
//   - [Verify] proves that nothing committed has changed: it re-hashes
//     every committed file against its commit record, walks each profile's
//     hash chain (and, with a public key, every record's signature), and
//     reports what else lies in the data directory.
//   - [Sweep] removes what killed writers left behind, and never anything it
//     cannot classify, nor anything in a profile whose chain is broken: it
//     reports those instead.
//   - [RemoveOldVersions] retires whole old versions by the grace rules.
//
// Break-lock and compaction live in the core (store.BreakLock,
// store.Compact): they take part in the commit protocol itself.
package maint
