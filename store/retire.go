package store

import (
	"context"
	"fmt"
	"path"
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
	// A profile that does not exist is NotFound before anything is
	// created (taking the lock would make its directory).
	if _, _, err := s.readManifest(ctx, p); err != nil {
		return nil, err
	}
	unlock, err := s.lockProfile(ctx, p)
	if err != nil {
		return nil, err
	}
	defer func() { _ = unlock() }()
	latest, tok, err := s.readManifest(ctx, p)
	if err != nil {
		return nil, err
	}
	if err := s.syncLog(ctx, ps); err != nil {
		return nil, err
	}
	// Nothing is committed onto a log altered under this process (red
	// team round 28's l01), nor a retired version's files removed.
	if err := s.checkLogEnds(ctx, ps); err != nil {
		return nil, err
	}
	// A write whose manifest move was lost (its writer killed) is the
	// latest: move the manifest first, as a commit cycle would.
	if latest, _, _, err = s.repairManifest(ctx, ps, latest, tok, false); err != nil {
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
		// A temp of the segment swept under it (a sweep with no age; red
		// team round 21's v03) is a race, not an internal error: nothing
		// was committed.
		return nil, fmt.Errorf("retire versions of %s: %w", p, raced(p, err))
	}
	out := make([]string, 0, len(recs))
	for _, c := range recs {
		out = append(out, c.Version)
		// Committed: the files go now (or by sweep if this fails half
		// way) — all but young files no record lists, which belong to
		// puts still running (an append staged into this version before
		// it was superseded re-targets from them).
		if s.writingTo(p) {
			// A put of this process may still open files in it (a
			// partitioned append opens one per partition as rows come):
			// its directory stays for it to re-target from, and sweep
			// removes what is left (red team round 34's r11).
			if _, err := s.deleteVersionData(ctx, p, c.version(), youngFiles); err != nil {
				s.opts.log.Error().Err(err).Str("profile", p.String()).Str("version", c.Version).Msg("retired, but not all files removed; sweep removes the rest")
			}
			continue
		}
		if _, err := s.deleteVersionFiles(ctx, p, c.version(), youngFiles); err != nil {
			s.opts.log.Error().Err(err).Str("profile", p.String()).Str("version", c.Version).Msg("retired, but not all files removed; sweep removes the rest")
		}
	}
	s.opts.log.Info().Str("profile", p.String()).Strs("versions", out).Msg("retired old versions")
	return out, nil
}

// youngFiles is how recent a file no record lists must be to be taken for
// one of a put still running (a put's files are written within seconds of
// its commit).
const youngFiles = time.Hour

// DeleteVersionFiles removes the files of a version directory that the
// layout defines — data files (at the root and in partition directories),
// claims, records of old data directories, .version.json, temps — but not
// files no record lists that were modified less than keepYounger ago (a
// running put's), then the directories left empty. Anything else (a link,
// a FIFO, an unknown name) stays, and with it its directory: it is
// reported by verify, never removed. It returns what it removed, relative
// to the data directory. Retention and sweep use it for retired versions
// and for versions whose write never committed.
func (s *Store) DeleteVersionFiles(ctx context.Context, keys []string, v int, keepYounger time.Duration) ([]string, error) {
	p, err := s.resolve(keys)
	if err != nil {
		return nil, err
	}
	return s.deleteVersionFiles(ctx, p, v, keepYounger)
}

func (s *Store) deleteVersionFiles(ctx context.Context, p profile, v int, keepYounger time.Duration) ([]string, error) {
	return s.deleteVersion(ctx, p, v, keepYounger, false)
}

// deleteVersionData is deleteVersionFiles that keeps the directories and
// the .version.json: for a retired version a running put of this process
// may still write into.
func (s *Store) deleteVersionData(ctx context.Context, p profile, v int, keepYounger time.Duration) ([]string, error) {
	return s.deleteVersion(ctx, p, v, keepYounger, true)
}

func (s *Store) deleteVersion(ctx context.Context, p profile, v int, keepYounger time.Duration, keepDirs bool) ([]string, error) {
	ps := s.state(p)
	if err := s.syncLog(ctx, ps); err != nil {
		return nil, err
	}
	if err := s.checkLogEnds(ctx, ps); err != nil {
		return nil, err // (the records that say what to keep may be gone)
	}
	recorded := map[string]bool{}
	ps.mu.Lock()
	recs := append([]*CommitRecord(nil), ps.log.byVersion[v]...)
	ps.mu.Unlock()
	if vs, err := s.loadVersion(ctx, ps, v, -1, loadRead); err == nil {
		recs = vs.Records // the log's and an old data dir's
	}
	for _, r := range recs {
		for _, f := range r.Files {
			recorded[p.join(f.Path)] = true
		}
	}
	cutoff := s.opts.now().Add(-keepYounger)
	var removed []string
	info := ""
	var walk func(dir string, depth int) (empty bool, err error)
	walk = func(dir string, depth int) (bool, error) {
		entries, err := s.fs.List(ctx, dir)
		if isNotExist(err) {
			return true, nil
		}
		if err != nil || depth > maxKeys {
			return false, err
		}
		left := 0
		for _, e := range entries {
			name := path.Join(dir, e.Name)
			regular := !e.Dir && !e.Link && !e.Special
			known := regular && (dataFileRe.MatchString(e.Name) || isTempName(e.Name) ||
				(depth == 0 && (e.Name == versionInfoName || claimRe.MatchString(e.Name) || legacyRecRe.MatchString(e.Name))))
			switch {
			case depth == 0 && regular && e.Name == versionInfoName:
				// Last, once nothing else is left: a version holding data
				// files Quiver wrote without it reads as one whose metadata
				// was removed, and is kept (loadVersion).
				info = name
			case isHiveDir(e):
				empty, err := walk(name, depth+1)
				if err != nil {
					return false, err
				}
				if !empty || keepDirs {
					left++
					continue
				}
				if err := s.fs.Delete(ctx, name); err != nil && !isNotExist(err) {
					left++
				}
			case !known:
				// Never removed: a link, a FIFO, a directory or a name the
				// layout does not define. Verify reports it.
				left++
			case !recorded[name] && e.ModTime.After(cutoff) && (isTempName(e.Name) || dataFileRe.MatchString(e.Name) && s.maybeRunningPut(ctx, name)):
				left++ // a running put's
			default:
				if err := s.fs.Delete(ctx, name); err != nil && !isNotExist(err) {
					return false, err
				}
				removed = append(removed, name)
			}
		}
		return left == 0, nil
	}
	vdir := p.vdir(v)
	if _, err := s.fs.Stat(ctx, vdir); isNotExist(err) {
		return nil, nil // nothing left
	}
	empty, err := walk(vdir, 0)
	if err != nil {
		return removed, err
	}
	if keepDirs {
		return removed, nil
	}
	if empty && info != "" {
		if err := s.fs.Delete(ctx, info); err != nil && !isNotExist(err) {
			return removed, err
		}
		removed = append(removed, info)
	}
	if empty {
		if err := s.fs.Delete(ctx, vdir); err == nil {
			return []string{vdir}, nil // the whole version went
		}
	}
	return removed, nil
}

// maybeRunningPut reports whether a young numbered file no record lists
// may be a running put's: one Quiver wrote, or one it cannot tell (a CSV
// file, a footer that cannot be read). A Parquet file Quiver did not write
// is pyrosome's, complete (pyrosome renames its files in), and goes with
// its retired version at any age (red team round 33's q03: it outlived
// the start-up sweep after a kill -9 in retention).
func (s *Store) maybeRunningPut(ctx context.Context, name string) bool {
	if _, f, ok := parseDataFile(path.Base(name)); !ok || f != FormatParquet {
		return true
	}
	foot, err := s.readFooter(ctx, name)
	return err != nil || foot.Quiver
}
