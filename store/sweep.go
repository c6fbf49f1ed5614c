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

// SweepReport is the result of Sweep; it is the JSON body of the sweep
// action.
type SweepReport struct {
	// Removed are the removed files and directories, relative to the data
	// directory ("sales/orders/v0/.3f…parquet.tmp").
	Removed []string `json:"removed"`
}

// Sweep removes what killed writers left behind, in every profile, once it
// is older than olderThan:
//   - hidden temp files (*.tmp) not written to for olderThan;
//   - files under partition directories that no commit record lists
//     (uncommitted orphans of a multi-file put), judged by modification
//     time, and only while their index still has no commit record;
//   - version directories a write abandoned before its commit record: above
//     the manifest's latest with no commit record (whatever files they
//     hold: the manifest never named them), or below it holding no record,
//     data file or claim at all — once their .version.json creation time,
//     directory and every file in them are older than olderThan;
//   - directories moved aside by retention (.vN.deleting-…), at any age.
//
// It never removes a committed file, a numbered file at a version root (it
// is visible to readers by the pyrosome rule), a claim marker, a commit
// record, a manifest or a lock. A live writer keeps its files young, so a
// threshold well above the longest pause of a writer (default use: 1 h)
// never touches one; olderThan 0 removes every temp at once and is for a
// data directory nobody is writing to.
func (s *Store) Sweep(ctx context.Context, olderThan time.Duration) (*SweepReport, error) {
	if olderThan < 0 {
		return nil, fmt.Errorf("%w: negative sweep age %s", ErrInvalidArgument, olderThan)
	}
	rep := &SweepReport{Removed: []string{}}
	cutoff := s.opts.now().Add(-olderThan)
	err := s.ListProfiles(ctx, nil, func(ps ProfileSummary) error {
		return s.sweepProfile(ctx, profile{keys: ps.Keys, dir: path.Join(ps.Keys...)}, ps.Latest, cutoff, rep)
	})
	for _, r := range rep.Removed {
		s.opts.log.Info().Str("path", r).Msg("swept")
	}
	return rep, err
}

func (s *Store) sweepProfile(ctx context.Context, p profile, latest int, cutoff time.Time, rep *SweepReport) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	entries, err := s.fs.ReadDir(p.dir)
	if err != nil {
		return fmt.Errorf("sweep %s: %w", p, err)
	}
	for _, e := range entries {
		name := p.join(e.Name())
		switch {
		case e.IsDir() && deletingRe.MatchString(e.Name()):
			if err := s.fs.RemoveAll(name); err != nil {
				return fmt.Errorf("sweep %s: %w", p, err)
			}
			rep.Removed = append(rep.Removed, name)
		case e.IsDir() && e.Name() == requestsDir:
			if err := s.sweepTemps(ctx, name, cutoff, rep); err != nil {
				return err
			}
		case !e.IsDir():
			if err := s.sweepTemp(name, e, cutoff, rep); err != nil {
				return err
			}
		}
	}
	for _, v := range versionDirs(entries) {
		if err := s.sweepVersion(ctx, p, v, latest, cutoff, rep); err != nil {
			return err
		}
	}
	return nil
}

// sweepTemp removes name if it is a temp file last written before cutoff.
func (s *Store) sweepTemp(name string, e fs.DirEntry, cutoff time.Time, rep *SweepReport) error {
	if e.IsDir() || !isTempName(e.Name()) {
		return nil
	}
	info, err := e.Info()
	if err != nil || !info.ModTime().Before(cutoff) {
		return nil
	}
	return s.sweepRemove(name, rep)
}

func (s *Store) sweepRemove(name string, rep *SweepReport) error {
	err := s.fs.Remove(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // published or removed meanwhile
	}
	if err != nil {
		return fmt.Errorf("sweep %s: %w", name, err)
	}
	rep.Removed = append(rep.Removed, name)
	return nil
}

func (s *Store) sweepTemps(ctx context.Context, dir string, cutoff time.Time, rep *SweepReport) error {
	return s.walkFiles(ctx, dir, func(name string, e fs.DirEntry) error {
		return s.sweepTemp(name, e, cutoff, rep)
	})
}

func (s *Store) sweepVersion(ctx context.Context, p profile, v, latest int, cutoff time.Time, rep *SweepReport) error {
	vname := VersionName(v)
	vdir := p.join(vname)
	entries, err := s.fs.ReadDir(vdir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sweep %s %s: %w", p, vname, err)
	}
	hasRecord, hasData := false, false // hasData: a claim or a root data file
	for _, e := range entries {
		_, _, data := parseDataFile(e.Name())
		switch {
		case commitRe.MatchString(e.Name()):
			hasRecord = true
		case data || strings.HasSuffix(e.Name(), claimSuffix):
			hasData = true
		}
	}
	// A version above the manifest with no commit record was never named by
	// it and acknowledged to nobody: a write killed before its commit (even
	// after publishing its files), as verify reports it. Below the manifest,
	// only a version holding nothing at all is abandoned: its root files are
	// visible by the pyrosome rule.
	abandoned := latest >= 0 && ((!hasRecord && (v > latest || (!hasData && v != latest))) ||
		(v != latest && uncommittedWrite(entries)))
	if abandoned {
		// A write that never committed anything. Judge its age before
		// touching anything in it: removing a temp makes the dir young.
		age, ok := s.versionAge(ctx, vdir, s.opts.now())
		if ok && s.opts.now().Add(-age).Before(cutoff) {
			if err := s.removeVersionDir(p, v); err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return fmt.Errorf("sweep %s: %w", p, err)
			}
			rep.Removed = append(rep.Removed, vdir)
			return nil
		}
	}
	// Files first, records second: a file whose record appears in between
	// is then known to be committed.
	type orphan struct {
		name string
		idx  int
	}
	var orphans []orphan
	err = s.walkFiles(ctx, vdir, func(name string, e fs.DirEntry) error {
		base := e.Name()
		rel := strings.TrimPrefix(name, vdir+"/")
		switch {
		case isTempName(base):
			return s.sweepTemp(name, e, cutoff, rep)
		case strings.HasPrefix(base, "."):
			// claims, records, .version.json
		case !strings.Contains(rel, "/"):
			// A root file is visible by the pyrosome rule, unless Quiver
			// wrote it and no record lists it (checked below).
			if _, f, ok := parseDataFile(base); !ok || f != FormatParquet {
				return nil
			}
			info, err := e.Info()
			if err != nil || !info.ModTime().Before(cutoff) {
				return nil
			}
			if _, ours, err := s.parquetFooter(name); err == nil && ours {
				orphans = append(orphans, orphan{name, indexOfPath(name)})
			}
		default: // under a partition directory
			if _, _, ok := parseDataFile(base); !ok {
				return nil // not a file Quiver writes: not ours to delete
			}
			info, err := e.Info()
			if err == nil && info.ModTime().Before(cutoff) {
				orphans = append(orphans, orphan{name, indexOfPath(name)})
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(orphans) == 0 {
		return nil
	}
	if entries, err = s.fs.ReadDir(vdir); err != nil {
		return fmt.Errorf("sweep %s %s: %w", p, vname, err)
	}
	listed := map[string]bool{}
	badIdx := map[int]bool{}
	for _, e := range entries {
		i, ok := parseIndexed(commitRe, e.Name())
		if !ok || e.IsDir() {
			continue
		}
		b, err := s.fs.ReadFile(p.join(vname, commitName(i)))
		if err != nil {
			return fmt.Errorf("sweep %s %s: %w", p, vname, err)
		}
		c, err := ParseCommitRecord(b)
		if err != nil {
			// An unreadable record still says its index is committed: keep
			// everything that index may own. Verify reports the record.
			badIdx[i] = true
			continue
		}
		for _, f := range c.Files {
			listed[p.join(f.Path)] = true
		}
	}
	for _, o := range orphans {
		if listed[o.name] || badIdx[o.idx] {
			continue
		}
		if o.idx >= 0 {
			// The put may have committed between the listing and now.
			if _, err := s.fs.Stat(p.join(vname, commitName(o.idx))); err == nil {
				continue
			}
		}
		if err := s.sweepRemove(o.name, rep); err != nil {
			return err
		}
	}
	return nil
}
