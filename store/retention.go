package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"time"
)

// DefaultRetentionGrace is how long a superseded version is kept for
// readers still holding tickets for it, unless told otherwise.
const DefaultRetentionGrace = time.Hour

// dirRenamer is the FS capability retention and sweep need to take a
// directory out of readers' sight in one step before deleting it.
// RenameDir moves a directory (names relative to the data directory, same
// parent) and makes the move durable; the target must not exist.
type dirRenamer interface {
	RenameDir(oldname, newname string) error
}

// RenameDir implements dirRenamer for local and NFS directories.
func (l *localFS) RenameDir(oldname, newname string) error {
	src, dst := l.abs(oldname), l.abs(newname)
	if _, err := os.Lstat(dst); err == nil {
		return &fs.PathError{Op: "rename", Path: newname, Err: fs.ErrExist}
	}
	if err := os.Rename(src, dst); err != nil {
		return err
	}
	return syncDir(filepath.Dir(dst))
}

// deletingRe matches a directory moved aside for deletion; whatever is
// left of one (the deleting process died) is removed by Sweep.
var deletingRe = regexp.MustCompile(`^\.v\d+\.deleting-[0-9a-f]+$`)

// removeVersionDir deletes a whole version directory: first renamed to a
// hidden name, so readers see either the whole version or none of it, then
// removed. fs.ErrNotExist means someone else removed it first.
func (s *Store) removeVersionDir(p profile, version int) error {
	r, ok := s.fs.(dirRenamer)
	if !ok {
		return fmt.Errorf("remove %s %s: the file system cannot rename directories", p, VersionName(version))
	}
	aside := p.join("." + VersionName(version) + ".deleting-" + randomHex()[:16])
	if err := r.RenameDir(p.join(VersionName(version)), aside); err != nil {
		return err
	}
	if err := s.fs.RemoveAll(aside); err != nil {
		return fmt.Errorf("remove %s %s (moved aside; sweep finishes it): %w", p, VersionName(version), err)
	}
	return nil
}

// RetentionReport is the result of RemoveOldVersions; it is the JSON body
// of the remove-old-versions action.
type RetentionReport struct {
	// Removed are the removed versions ("v0"), oldest first.
	Removed []string `json:"removed"`
	// Kept are old versions beyond keep that were not removed, and why.
	Kept []KeptVersion `json:"kept,omitempty"`
}

// KeptVersion is an old version RemoveOldVersions left in place.
type KeptVersion struct {
	Version string `json:"version"`
	Reason  string `json:"reason"`
}

// RemoveOldVersions deletes whole old version directories of a profile,
// keeping the newest keep versions (keep >= 1) the manifest has reached.
// It never removes the latest version, a version newer than the manifest's
// latest, a version whose write has not committed (no write commit record:
// a write in progress that a faster concurrent write overtook), or a
// version superseded less than grace ago. Only complete versions count
// towards keep.
// A version's superseded time is the committed time in the write record of
// the next newer version that has one, never a file's modification time;
// an old version whose supersession cannot be dated that way (the newer
// versions were written by pyrosome) is kept unless grace is 0.
//
// Each version is first renamed to a hidden name and then deleted, so a
// reader sees either all of it or none; a reader that opens a file of a
// removed version gets ErrVersionNotFound.
func (s *Store) RemoveOldVersions(ctx context.Context, keys []string, keep int, grace time.Duration) (*RetentionReport, error) {
	if keep < 1 {
		return nil, fmt.Errorf("%w: keep must be at least 1 (the latest version is never removed), not %d", ErrInvalidArgument, keep)
	}
	if grace < 0 {
		return nil, fmt.Errorf("%w: negative grace period %s", ErrInvalidArgument, grace)
	}
	p, err := s.resolve(keys)
	if err != nil {
		return nil, err
	}
	latest, err := s.readManifest(p)
	if err != nil {
		return nil, err
	}
	entries, err := s.fs.ReadDir(p.dir)
	if err != nil {
		return nil, fmt.Errorf("retention of %s: %w", p, err)
	}
	rep := &RetentionReport{Removed: []string{}}
	// Complete versions count towards keep and may be removed; a version
	// still being written (or abandoned) is never touched here, even when a
	// concurrent write already moved the manifest past it.
	var vs []int
	for _, v := range versionDirs(entries) {
		if v > latest {
			continue
		}
		complete, err := s.versionComplete(p, v)
		if err != nil {
			return nil, err
		}
		if complete || v == latest {
			vs = append(vs, v)
		} else if v < latest {
			rep.Kept = append(rep.Kept, KeptVersion{VersionName(v), "not committed yet (a write in progress, or abandoned: sweep removes those)"})
		}
	}
	if len(vs) <= keep {
		return rep, nil
	}
	old, kept := vs[:len(vs)-keep], vs[len(vs)-keep:]
	now := s.opts.now()
	writeTimes := map[int]time.Time{} // version -> committed time of its write record (zero: none)
	supersededAt := func(v int) (time.Time, int, error) {
		for _, w := range append(old, kept...) {
			if w <= v {
				continue
			}
			t, ok := writeTimes[w]
			if !ok {
				var err error
				if t, err = s.writeCommitTime(p, w); err != nil {
					return time.Time{}, 0, err
				}
				writeTimes[w] = t
			}
			if !t.IsZero() {
				return t, w, nil
			}
		}
		return time.Time{}, -1, nil
	}
	for _, v := range old {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		vname := VersionName(v)
		if v >= latest { // cannot happen (keep >= 1); a last line of defence
			continue
		}
		if grace > 0 {
			at, by, err := supersededAt(v)
			if err != nil {
				return rep, err
			}
			if at.IsZero() {
				rep.Kept = append(rep.Kept, KeptVersion{vname, "no newer version has a write commit record to date its supersession"})
				continue
			}
			if since := now.Sub(at); since < grace {
				rep.Kept = append(rep.Kept, KeptVersion{vname, fmt.Sprintf("superseded by %s %s ago, within the grace period of %s", VersionName(by), since.Round(time.Second), grace)})
				continue
			}
		}
		if err := s.removeVersionDir(p, v); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed by a concurrent retention run
			}
			return rep, fmt.Errorf("retention of %s: %w", p, err)
		}
		rep.Removed = append(rep.Removed, vname)
		s.opts.log.Info().Str("profile", p.String()).Str("version", vname).Int("keep", keep).Dur("grace", grace).Msg("old version removed")
	}
	return rep, nil
}

// versionComplete reports whether a version's write finished: it has its
// write commit record, or (written by pyrosome, which leaves no
// .version.json) a visible data file.
func (s *Store) versionComplete(p profile, version int) (bool, error) {
	vdir := p.join(VersionName(version))
	entries, err := s.fs.ReadDir(vdir)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("retention of %s: %w", p, err)
	}
	info, data := false, false
	for _, e := range entries {
		switch name := e.Name(); {
		case name == commitName(0):
			return true, nil
		case name == versionInfoName:
			info = true
		default:
			if _, _, ok := parseDataFile(name); ok {
				data = true
			}
		}
	}
	return !info && data, nil
}

// writeCommitTime is the committed time of a version's write record
// (.0.commit.json), or zero if it has none.
func (s *Store) writeCommitTime(p profile, version int) (time.Time, error) {
	name := path.Join(p.join(VersionName(version)), commitName(0))
	b, err := s.fs.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("retention of %s: %w", p, err)
	}
	c, err := ParseCommitRecord(b)
	if err != nil {
		return time.Time{}, &CorruptionError{Path: name, Err: err}
	}
	if c.Mode != ModeWrite {
		return time.Time{}, nil
	}
	return c.Committed, nil
}
