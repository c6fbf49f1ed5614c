package store

import (
	"context"
	"fmt"
	"time"
)

// RetireCandidate is a version retention may consider.
type RetireCandidate struct {
	Version int
	// Superseded is when the next newer version was committed (the commit
	// time of its write record, or its .version.json creation time for
	// versions without records); zero when unknown.
	Superseded time.Time
}

// RetireVersions removes whole old versions. Holding the profile's
// manifest lock it lists the committed versions below the latest (oldest
// first) with the time each was superseded, lets pick choose (pick must
// never return the latest, and is not trusted to: the latest is never
// retired), commits one retire record per chosen version — the mark that
// tells readers, verify and sweep the version is gone on purpose — and then
// deletes their directories. It returns the retired version names.
func (s *Store) RetireVersions(ctx context.Context, keys []string, writer string, pick func(latest int, cands []RetireCandidate) []int) ([]string, error) {
	p, err := s.resolve(keys)
	if err != nil {
		return nil, err
	}
	ps := s.state(p)
	unlock, err := s.lockProfile(ctx, p)
	if err != nil {
		return nil, err
	}
	defer func() { _ = unlock() }()
	latest, _, err := s.readManifest(ctx, p)
	if err != nil {
		return nil, err
	}
	if err := s.syncLog(ctx, ps); err != nil {
		return nil, err
	}
	vers, err := s.versionNumbers(ctx, ps)
	if err != nil {
		return nil, err
	}
	var states []*VersionState
	for _, v := range vers {
		vs, err := s.loadVersion(ctx, ps, v, latest, loadRead)
		if err != nil {
			continue
		}
		if vs.Retired == nil && vs.Committed && v <= latest {
			states = append(states, vs)
		}
	}
	var cands []RetireCandidate
	for i, vs := range states {
		if vs.Version == latest {
			break
		}
		c := RetireCandidate{Version: vs.Version}
		if i+1 < len(states) {
			next := states[i+1]
			switch {
			case next.Write != nil:
				c.Superseded = next.Write.Committed
			case !next.Created.IsZero():
				c.Superseded = next.Created
			}
		}
		cands = append(cands, c)
	}
	chosen := pick(latest, cands)
	if len(chosen) == 0 {
		return []string{}, nil
	}
	allowed := map[int]bool{}
	for _, c := range cands {
		allowed[c.Version] = true
	}
	ps.mu.Lock()
	head, headHash := ps.log.head, ps.log.headHash
	ps.mu.Unlock()
	if writer == "" {
		writer = s.opts.writer
	}
	now := s.opts.now().UTC()
	var recs []*CommitRecord
	for _, v := range chosen {
		if !allowed[v] || v == latest {
			continue
		}
		head++
		c := &CommitRecord{Seq: head, Prev: headHash, Path: ProfilePath(p.keys), Keys: p.keys, Version: VersionName(v),
			Mode: ModeRetire, Files: []FileRecord{}, Committed: now, Writer: writer}
		if err := c.encodeLine(s.opts.signer); err != nil {
			return nil, err
		}
		headHash = c.Hash()
		recs = append(recs, c)
	}
	if len(recs) == 0 {
		return []string{}, nil
	}
	if err := s.appendSegment(ctx, ps, recs); err != nil {
		return nil, fmt.Errorf("retire versions of %s: %w", p, err)
	}
	out := make([]string, 0, len(recs))
	for _, c := range recs {
		out = append(out, c.Version)
		// Committed: the directory is deleted now, or by sweep if this
		// fails half way.
		if err := s.fs.DeleteAll(ctx, p.join(c.Version)); err != nil {
			s.opts.log.Error().Err(err).Str("profile", p.String()).Str("version", c.Version).Msg("retired, but not all files removed; sweep removes the rest")
		}
	}
	s.opts.log.Info().Str("profile", p.String()).Strs("versions", out).Msg("retired old versions")
	return out, nil
}
