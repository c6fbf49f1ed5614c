package store

import (
	"context"
	"encoding/json"
	"fmt"
)

// DefaultCompactTarget is the file size Compact aims for by default.
const DefaultCompactTarget = 512 << 20

// CompactOptions tune Compact.
type CompactOptions struct {
	// TargetFileBytes is the file size compaction aims for (default 512
	// MiB): a partition (or an unpartitioned version) larger than that is
	// written as several files of about that size. The compacted version is
	// still one commit, so readers see all of it or nothing.
	TargetFileBytes int64
	// Writer is the identity recorded in the compaction's commit record
	// (default: the store's writer).
	Writer string
}

// Compact rewrites the latest version of a profile as a new version with
// few large files: the same rows, the same schema (and schema version) and
// the same partitioning. An unpartitioned version keeps its row order;
// a partitioned one keeps the order of rows within each partition, and
// its files are read partition by partition. The old version stays until
// retention removes it. The commit's metadata says which version it was
// compacted from.
//
// Appends that land in the old version while compaction runs are appended
// to the new version afterwards (their rows follow the compacted ones), so
// none is lost from the latest version; an append that publishes after
// Compact returns still lands in the old version only, as with any write.
func (s *Store) Compact(ctx context.Context, keys []string, o CompactOptions) (*CommitRecord, error) {
	if o.TargetFileBytes < 0 {
		return nil, fmt.Errorf("%w: negative target file size", ErrInvalidArgument)
	}
	sn, err := s.Snapshot(ctx, keys, SnapshotOptions{Version: -1})
	if err != nil {
		return nil, err
	}
	from := VersionName(sn.Version)
	md := map[string]any{"compacted_from": from}
	if o.TargetFileBytes > 0 {
		md["target_file_bytes"] = o.TargetFileBytes
	}
	if o.TargetFileBytes == 0 {
		o.TargetFileBytes = DefaultCompactTarget
	}
	c, err := s.putSnapshot(ctx, sn, ModeWrite, md, o.TargetFileBytes, o.Writer)
	if err != nil {
		return nil, fmt.Errorf("compact %s %s: %w", sn.Path(), from, err)
	}
	// Catch up with appends committed to the old version meanwhile.
	done := map[string]bool{}
	for _, f := range sn.Files {
		done[f.Path] = true
	}
	for round := 0; round < 3; round++ {
		old, err := s.Snapshot(ctx, keys, SnapshotOptions{Version: sn.Version})
		if err != nil {
			return c, fmt.Errorf("compact %s %s: catching up: %w", sn.Path(), from, err)
		}
		var late []DataFile
		for _, f := range old.Files {
			if !done[f.Path] {
				late = append(late, f)
				done[f.Path] = true
			}
		}
		if len(late) == 0 {
			break
		}
		old.Files = late
		cur, err := s.Snapshot(ctx, keys, SnapshotOptions{Version: -1})
		if err != nil {
			return c, err
		}
		if VersionName(cur.Version) != c.Version {
			break // a newer write superseded the compacted version too
		}
		if _, err := s.putSnapshot(ctx, old, ModeAppend, map[string]any{"compacted_from": from, "catch_up": true}, 0, o.Writer); err != nil {
			return c, fmt.Errorf("compact %s %s: catching up: %w", sn.Path(), from, err)
		}
	}
	s.opts.log.Info().Str("profile", sn.Path()).Str("from", from).Str("to", c.Version).Int64("rows", c.Rows).Int("files", len(c.Files)).Msg("compacted")
	return c, nil
}

// putSnapshot streams the files of sn into the profile as one put.
func (s *Store) putSnapshot(ctx context.Context, sn *Snapshot, mode Mode, md map[string]any, target int64, writer string) (*CommitRecord, error) {
	rdr, err := s.OpenSnapshot(ctx, sn, nil)
	if err != nil {
		return nil, err
	}
	defer rdr.Release()
	mdj, err := json.Marshal(md)
	if err != nil {
		return nil, err
	}
	po := PutOptions{Mode: mode, SchemaVersion: sn.SchemaVersion, Format: string(sn.Format), Metadata: mdj, TargetFileBytes: target, Writer: writer}
	if mode == ModeWrite {
		po.PartitionBy = sn.PartitionBy
	}
	return s.Put(ctx, sn.Keys, rdr, po)
}
