package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sort"
)

// Lineage calls fn with every commit record of a profile in commit order:
// by version, then by index. It is the profile's pointer log. Versions the
// manifest has not reached yet (a write in progress) are left out. Records
// are read one at a time; a record that does not parse is a
// *CorruptionError. fn's error stops the walk and is returned.
func (s *Store) Lineage(ctx context.Context, keys []string, fn func(*CommitRecord) error) error {
	p, err := s.resolve(keys)
	if err != nil {
		return err
	}
	latest, err := s.readManifest(p)
	if err != nil {
		return err
	}
	entries, err := s.fs.ReadDir(p.dir)
	if err != nil {
		return fmt.Errorf("lineage of %s: %w", p, err)
	}
	for _, v := range versionDirs(entries) {
		if v > latest {
			break
		}
		vname := VersionName(v)
		ventries, err := s.fs.ReadDir(p.join(vname))
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed by retention meanwhile
		}
		if err != nil {
			return fmt.Errorf("lineage of %s %s: %w", p, vname, err)
		}
		var idx []int
		for _, e := range ventries {
			if i, ok := parseIndexed(commitRe, e.Name()); ok && !e.IsDir() {
				idx = append(idx, i)
			}
		}
		sort.Ints(idx)
		for _, i := range idx {
			if err := ctx.Err(); err != nil {
				return err
			}
			name := p.join(vname, commitName(i))
			b, err := s.fs.ReadFile(name)
			if errors.Is(err, fs.ErrNotExist) {
				break // the version went to retention meanwhile
			}
			if err != nil {
				return fmt.Errorf("lineage of %s: %w", p, err)
			}
			c, err := ParseCommitRecord(b)
			if err != nil {
				return &CorruptionError{Path: name, Err: err}
			}
			if err := fn(c); err != nil {
				return err
			}
		}
	}
	return nil
}

// WriteLineage writes a profile's lineage to w as NDJSON: one commit record
// (compact JSON) per line, oldest first.
func (s *Store) WriteLineage(ctx context.Context, w io.Writer, keys []string) error {
	enc := json.NewEncoder(w)
	return s.Lineage(ctx, keys, func(c *CommitRecord) error { return enc.Encode(c) })
}
