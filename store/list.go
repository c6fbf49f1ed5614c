package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"time"
)

// VersionSummary describes one version of a profile.
type VersionSummary struct {
	Version       string    `json:"version"`
	Files         int       `json:"files"`
	Rows          int64     `json:"rows"`
	Bytes         int64     `json:"bytes"`
	Created       time.Time `json:"created,omitzero"`
	Format        Format    `json:"format"`
	SchemaVersion string    `json:"schema_version,omitempty"`
	PartitionBy   []string  `json:"partition_by,omitempty"`
	Commits       int       `json:"commits"`
	// LastCommit is the time of the version's newest commit record.
	LastCommit time.Time `json:"last_commit,omitzero"`
}

// Versions lists every version of a profile, oldest first, and the latest
// one the manifest names.
func (s *Store) Versions(ctx context.Context, keys []string) (latest int, out []VersionSummary, err error) {
	p, err := s.resolve(keys)
	if err != nil {
		return 0, nil, err
	}
	if latest, err = s.readManifest(p); err != nil {
		return 0, nil, err
	}
	entries, err := s.fs.ReadDir(p.dir)
	if err != nil {
		return 0, nil, fmt.Errorf("list %s: %w", p, err)
	}
	for _, v := range versionDirs(entries) {
		if err := ctx.Err(); err != nil {
			return 0, nil, err
		}
		if v > latest {
			continue // being written, or abandoned: not a version yet
		}
		vs, err := s.versionState(p, v)
		if err != nil {
			return 0, nil, err
		}
		if vs.empty() && v != latest {
			continue // reserved by a write that never committed
		}
		out = append(out, vs.summary())
	}
	return latest, out, nil
}

func (vs *versionState) summary() VersionSummary {
	sum := VersionSummary{Version: VersionName(vs.Version), Files: len(vs.Files), Rows: vs.Rows(), Bytes: vs.Bytes(),
		Created: vs.Created, Format: vs.Format, SchemaVersion: vs.SchemaVersion, PartitionBy: vs.PartitionBy, Commits: len(vs.Records)}
	for _, r := range vs.Records {
		if r.Committed.After(sum.LastCommit) {
			sum.LastCommit = r.Committed
		}
		if sum.Created.IsZero() || (r.Mode == ModeWrite && r.Committed.Before(sum.Created)) {
			sum.Created = r.Committed
		}
	}
	return sum
}

// ProfileSummary is one profile found by ListProfiles.
type ProfileSummary struct {
	Keys   []string
	Latest int
}

// Path is the profile's slash-joined name.
func (ps ProfileSummary) Path() string { return ProfilePath(ps.Keys) }

// ListProfiles walks the profiles under a key prefix (matched component by
// component: "sales" matches sales/orders, not salesman/x; nil or empty
// lists all), calling fn for each in lexical order. It never descends into
// a profile. A profile whose manifest does not parse is reported through fn's
// caller as an error only if fn returns it; here it is skipped with Latest -1.
func (s *Store) ListProfiles(ctx context.Context, prefix []string, fn func(ProfileSummary) error) error {
	if len(prefix) > 0 {
		p, err := s.resolve(prefix)
		if err != nil {
			return err
		}
		prefix = p.keys
	}
	var walk func(keys []string) error
	walk = func(keys []string) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		dir := path.Join(keys...)
		if dir == "" {
			dir = "."
		}
		if len(keys) > 0 {
			p := profile{keys: keys, dir: dir}
			b, err := s.fs.ReadFile(path.Join(dir, manifestName))
			if err == nil {
				latest, perr := parseManifest(b, p)
				if perr != nil {
					latest = -1
				}
				return fn(ProfileSummary{Keys: append([]string(nil), keys...), Latest: latest})
			}
			if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscallENOTDIR) {
				return fmt.Errorf("list %s: %w", p, err)
			}
		}
		entries, err := s.fs.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscallENOTDIR) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("list %s: %w", ProfilePath(keys), err)
		}
		for _, e := range entries {
			name := e.Name()
			if !e.IsDir() || strings.HasPrefix(name, ".") || validateKey(name) != nil {
				continue
			}
			if err := walk(append(keys[:len(keys):len(keys)], name)); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(append([]string(nil), prefix...))
}
