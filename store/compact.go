package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// DefaultCompactTarget is the file size Compact aims for by default.
const DefaultCompactTarget = 512 << 20

// CompactOptions tune Compact.
type CompactOptions struct {
	// TargetFileBytes is the file size compaction aims for (default 512
	// MiB): a partition (or an unpartitioned version) larger than that is
	// written as several files of about that size.
	TargetFileBytes int64
	// Writer is the identity recorded in the compaction's commit record
	// (default: the store's writer).
	Writer string
}

// Compact rewrites the latest version of a profile as a new version with
// few large files: the same rows, the same schema (and schema version) and
// the same partitioning. An unpartitioned version keeps its row order; a
// partitioned one keeps the order of rows within each partition. The old
// version stays until retention removes it. The commit's metadata says
// which version it was compacted from.
//
// Appends that commit to the old version while compaction runs are carried
// into the new version before it commits (their rows follow the compacted
// ones), in the same commit: no acknowledged append is missing from the
// latest version, whatever the interleaving.
func (s *Store) Compact(ctx context.Context, keys []string, o CompactOptions) (*CommitRecord, error) {
	if o.TargetFileBytes < 0 {
		return nil, fmt.Errorf("%w: negative target file size", ErrInvalidArgument)
	}
	p, err := s.resolve(keys)
	if err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		c, err := s.compact(ctx, p, o)
		if !errors.Is(err, errCompactionStale) {
			return c, err
		}
		if attempt == 2 {
			return nil, fmt.Errorf("%w: %s: %v (three times); retry later", ErrUnavailable, p, err)
		}
	}
}

func (s *Store) compact(ctx context.Context, p profile, o CompactOptions) (*CommitRecord, error) {
	ps := s.state(p)
	vs, err := s.readableVersion(ctx, p, Latest)
	if err != nil {
		return nil, err
	}
	// The carry point is the newest record the snapshot holds: anything
	// committed to the version later is carried in.
	var seq int64
	for _, r := range vs.Records {
		seq = max(seq, r.Seq)
	}
	sn := &Snapshot{Keys: p.keys, Version: vs.Version, Format: vs.Format, Schema: vs.Schema, PartitionBy: vs.PartitionBy,
		SchemaVersion: vs.SchemaVersion, Created: vs.Created, Files: vs.Files, Records: vs.Records}
	from := VersionName(sn.Version)
	md := map[string]any{"compacted_from": from}
	if o.TargetFileBytes > 0 {
		md["target_file_bytes"] = o.TargetFileBytes
	} else {
		o.TargetFileBytes = DefaultCompactTarget
	}
	// The new record vouches for every row it copies: recorded files are
	// checked against their SHA-256 first (a file changed on disk fails
	// the compaction with DataLoss instead of entering a signed history),
	// and files no record vouches for (pyrosome's appends, or planted) are
	// named in the compaction's metadata, so that the history says which
	// bytes entered it without a record.
	var unrecorded []string
	for _, df := range sn.Files {
		if !df.Recorded {
			unrecorded = append(unrecorded, df.Path)
		}
	}
	if len(unrecorded) > 0 {
		md["unrecorded_count"] = len(unrecorded)
		md["unrecorded_files"] = unrecorded[:min(len(unrecorded), 500)]
		s.opts.log.Warn().Str("profile", p.String()).Str("from", from).Strs("files", unrecorded).Msg("compaction copies files no commit record vouches for")
	}
	mdj, _ := json.Marshal(md)
	rdr, err := s.ReadSnapshot(ctx, sn, ReadOptions{verify: true, Cached: false})
	if err != nil {
		return nil, err
	}
	defer rdr.Release()
	po := PutOptions{Mode: ModeWrite, SchemaVersion: sn.SchemaVersion, Format: string(sn.Format), Metadata: mdj,
		TargetFileBytes: o.TargetFileBytes, Writer: o.Writer, PartitionBy: sn.PartitionBy,
		carry: &carryFrom{version: sn.Version, seq: seq}}
	c, err := s.put(ctx, ps, rdr, po, 0)
	if errors.Is(err, errCompactionStale) {
		return nil, err
	}
	// A file swept under it (a sweep with no age) is a race, as for a
	// put (red team round 21's v03: this answered INTERNAL).
	err = raced(p, err)
	if err != nil {
		return nil, fmt.Errorf("compact %s %s: %w", p, from, err)
	}
	s.opts.log.Info().Str("profile", p.String()).Str("from", from).Str("to", c.Version).Int64("rows", c.Rows).Int("files", len(c.Files)).Msg("compacted")
	return c, nil
}
