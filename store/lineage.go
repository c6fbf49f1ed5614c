package store

import (
	"context"
	"encoding/json"
	"io"
)

// Lineage calls fn with every commit record of a profile in commit order:
// records of an old data directory (before the commit log, by version and
// index), then the log in seq order — writes, appends and retirements. It
// is the profile's pointer log. fn's error stops the walk and is returned.
func (s *Store) Lineage(ctx context.Context, keys []string, fn func(*CommitRecord) error) error {
	p, err := s.resolve(keys)
	if err != nil {
		return err
	}
	latest, _, err := s.readManifest(ctx, p)
	if err != nil {
		return err
	}
	ps := s.state(p)
	if err := s.syncLog(ctx, ps); err != nil {
		return err
	}
	if latest, err = s.latestOf(ctx, ps, latest); err != nil {
		return err
	}
	vers, err := s.versionNumbers(ctx, ps)
	if err != nil {
		return err
	}
	for _, v := range vers {
		vs, err := s.loadVersion(ctx, ps, v, latest, loadRead)
		if err != nil {
			continue
		}
		for _, c := range vs.Records[:vs.Legacy] {
			if err := fn(c); err != nil {
				return err
			}
		}
	}
	ps.mu.Lock()
	recs := append([]*CommitRecord(nil), ps.log.records...)
	ps.mu.Unlock()
	for _, c := range recs {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(c); err != nil {
			return err
		}
	}
	return nil
}

// WriteLineage writes a profile's lineage to w as NDJSON: one commit record
// per line, oldest first. Records from the log are written as stored, so
// their hashes and signatures can be checked from the output alone.
func (s *Store) WriteLineage(ctx context.Context, w io.Writer, keys []string) error {
	return s.Lineage(ctx, keys, func(c *CommitRecord) error {
		b := c.Line()
		if b == nil {
			var err error
			if b, err = json.Marshal(c); err != nil {
				return err
			}
		}
		if _, err := w.Write(append(b, '\n')); err != nil {
			return err
		}
		return nil
	})
}
