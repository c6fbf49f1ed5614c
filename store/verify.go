package store

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"math"
	"path"
	"sort"
	"strings"
	"time"
)

// Kinds of problem Verify reports. They are part of the wire contract
// (DESIGN §3.1): clients match on these strings.
const (
	// ProblemMutated: a committed file (or commit record) whose bytes no
	// longer match what was committed.
	ProblemMutated = "mutated"
	// ProblemMissing: a file a commit record lists is gone.
	ProblemMissing = "missing"
	// ProblemOrphan: a file under a partition directory that no commit record
	// lists (an uncommitted leftover; invisible to readers), or a version
	// directory that a killed writer abandoned before committing anything.
	ProblemOrphan = "orphan"
	// ProblemUnrecorded: a numbered data file at a version root with no
	// commit record. It is visible (the pyrosome rule) but unaudited, e.g.
	// appended by pyrosome.
	ProblemUnrecorded = "unrecorded"
	// ProblemStaleTemp: a hidden *.tmp file older than the stale threshold.
	ProblemStaleTemp = "stale_temp"
	// ProblemStaleLock: a manifest lock whose owner is provably gone or
	// which is older than the lock stale limit.
	ProblemStaleLock = "stale_lock"
)

// DefaultStaleAfter is the age after which Verify calls a temp file or an
// abandoned version stale, and the default threshold of Sweep.
const DefaultStaleAfter = time.Hour

// VerifyOptions select what Verify checks.
type VerifyOptions struct {
	// Keys names one profile. When empty, every profile under Prefix is
	// checked (matched component by component; empty: the whole data dir).
	Keys   []string
	Prefix []string
	// Sample is the fraction of committed files whose content is re-hashed;
	// 0 or >= 1 hashes all of them. Every file is still listed and its size
	// compared, so missing, orphan, unrecorded and truncated files are found
	// whatever the rate. The choice depends only on Seed and the file's path,
	// so the same seed checks the same files.
	Sample float64
	Seed   int64
	// StaleAfter is the age after which temp files and abandoned version
	// directories are reported (default DefaultStaleAfter).
	StaleAfter time.Duration
}

// Problem is one finding of Verify. Path is relative to the data directory:
// the profile's path followed by the file's path in the profile
// ("sales/orders/v0/1.parquet"), so findings of several profiles can be
// told apart. It never holds the server's absolute path.
type Problem struct {
	Kind   string `json:"kind"`
	Path   string `json:"path"`
	Detail string `json:"detail"`
}

// VerifyReport is the result of Verify; it is the JSON body of the verify
// action.
type VerifyReport struct {
	OK bool `json:"ok"`
	// CheckedFiles counts the committed files whose content was re-hashed.
	CheckedFiles int       `json:"checked_files"`
	Problems     []Problem `json:"problems"`
}

func (r *VerifyReport) add(kind, p, format string, args ...any) {
	r.Problems = append(r.Problems, Problem{Kind: kind, Path: p, Detail: fmt.Sprintf(format, args...)})
}

// Verify re-hashes committed data files against their commit records and
// reports everything that is not as committed: mutated, missing, orphan and
// unrecorded files, stale temps and stale locks. It streams: one file is
// open at a time and only one version's records are held in memory. It
// never changes the disk.
func (s *Store) Verify(ctx context.Context, o VerifyOptions) (*VerifyReport, error) {
	if o.StaleAfter <= 0 {
		o.StaleAfter = DefaultStaleAfter
	}
	if o.Sample < 0 || math.IsNaN(o.Sample) {
		return nil, fmt.Errorf("%w: sample rate %v (want 0 < rate <= 1)", ErrInvalidArgument, o.Sample)
	}
	rep := &VerifyReport{Problems: []Problem{}}
	if len(o.Keys) > 0 {
		p, err := s.resolve(o.Keys)
		if err != nil {
			return nil, err
		}
		b, err := s.fs.ReadFile(p.join(manifestName))
		if err != nil {
			if _, merr := s.readManifest(p); merr != nil {
				return nil, merr
			}
			return nil, fmt.Errorf("verify %s: %w", p, err)
		}
		latest, perr := parseManifest(b, p)
		if perr != nil {
			latest = -1
		}
		if err := s.verifyProfile(ctx, p, latest, o, rep); err != nil {
			return nil, err
		}
	} else {
		err := s.ListProfiles(ctx, o.Prefix, func(ps ProfileSummary) error {
			return s.verifyProfile(ctx, profile{keys: ps.Keys, dir: path.Join(ps.Keys...)}, ps.Latest, o, rep)
		})
		if err != nil {
			return nil, err
		}
	}
	rep.OK = len(rep.Problems) == 0
	return rep, nil
}

// verifyProfile checks one profile; latest is -1 when its manifest does
// not parse.
func (s *Store) verifyProfile(ctx context.Context, p profile, latest int, o VerifyOptions, rep *VerifyReport) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	now := s.opts.now()
	if latest < 0 {
		rep.add(ProblemMutated, p.join(manifestName), "manifest does not parse")
	}
	ls, err := s.inspectLock(p)
	if err != nil {
		return err
	}
	if ls.held && ls.stale {
		rep.add(ProblemStaleLock, p.join(lockName), "%s", ls.reason)
	}
	entries, err := s.fs.ReadDir(p.dir)
	if err != nil {
		return fmt.Errorf("verify %s: %w", p, err)
	}
	for _, e := range entries {
		if e.IsDir() && e.Name() == requestsDir {
			if err := s.walkFiles(ctx, p.join(requestsDir), func(name string, e fs.DirEntry) error {
				s.checkTemp(name, e, now, o.StaleAfter, rep)
				return nil
			}); err != nil {
				return err
			}
			continue
		}
		if !e.IsDir() {
			s.checkTemp(p.join(e.Name()), e, now, o.StaleAfter, rep)
		}
	}
	for _, v := range versionDirs(entries) {
		if err := s.verifyVersion(ctx, p, v, latest, o, now, rep); err != nil {
			return err
		}
	}
	return nil
}

// checkTemp reports name if it is a temp file older than staleAfter.
// Temps are judged by modification time: a writer still streaming into one
// keeps touching it.
func (s *Store) checkTemp(name string, e fs.DirEntry, now time.Time, staleAfter time.Duration, rep *VerifyReport) {
	if e.IsDir() || !isTempName(e.Name()) {
		return
	}
	info, err := e.Info()
	if err != nil {
		return // removed meanwhile: not stale
	}
	if age := now.Sub(info.ModTime()); age > staleAfter {
		rep.add(ProblemStaleTemp, name, "temp file last written %s ago (stale after %s)", age.Round(time.Second), staleAfter)
	}
}

// verifyVersion checks one version directory against its commit records.
func (s *Store) verifyVersion(ctx context.Context, p profile, v, latest int, o VerifyOptions, now time.Time, rep *VerifyReport) error {
	vname := VersionName(v)
	vdir := p.join(vname)
	entries, err := s.fs.ReadDir(vdir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // removed by retention meanwhile
	}
	if err != nil {
		return fmt.Errorf("verify %s %s: %w", p, vname, err)
	}
	expected := map[string]FileRecord{} // path relative to the profile
	nrec := 0
	corrupt := map[int]bool{} // indexes whose record does not parse
	for _, e := range entries {
		i, ok := parseIndexed(commitRe, e.Name())
		if !ok || e.IsDir() {
			continue
		}
		nrec++
		name := p.join(vname, commitName(i))
		b, err := s.fs.ReadFile(name)
		if err != nil {
			return fmt.Errorf("verify %s %s: %w", p, vname, err)
		}
		c, err := ParseCommitRecord(b)
		if err == nil && (c.Version != vname || c.Index != i) {
			err = fmt.Errorf("it names %s index %d", c.Version, c.Index)
		}
		if err != nil {
			rep.add(ProblemMutated, name, "commit record does not parse: %v", err)
			corrupt[i] = true
			continue
		}
		for _, f := range c.Files {
			expected[f.Path] = f
		}
	}
	if (v > latest && latest >= 0 && nrec == 0) || (v != latest && uncommittedWrite(entries)) {
		// Not committed (yet): a write in progress or one a killed writer
		// abandoned. Only an old one is a finding; sweep removes it.
		if age, ok := s.versionAge(ctx, vdir, now); ok && age > o.StaleAfter {
			rep.add(ProblemOrphan, vdir, "version directory never committed, untouched for %s", age.Round(time.Second))
		}
		return nil
	}
	seen := map[string]bool{}
	err = s.walkFiles(ctx, vdir, func(name string, e fs.DirEntry) error {
		rel := strings.TrimPrefix(name, p.dir+"/")
		base := e.Name()
		if isTempName(base) {
			s.checkTemp(name, e, now, o.StaleAfter, rep)
			return nil
		}
		if strings.HasPrefix(base, ".") {
			return nil // claims, records, .version.json
		}
		inPartition := strings.Count(rel, "/") >= 2
		fr, ok := expected[rel]
		if !ok && corrupt[indexOfPath(rel)] {
			return nil // its record is reported as mutated already
		}
		if !ok {
			switch _, _, isData := parseDataFile(base); {
			case inPartition:
				rep.add(ProblemOrphan, name, "no commit record lists this file; readers do not see it")
			case isData:
				if _, ours, err := s.parquetFooter(name); err == nil && ours {
					rep.add(ProblemOrphan, name, "Quiver data file without a commit record (its writer died before committing); readers do not see it")
					break
				}
				rep.add(ProblemUnrecorded, name, "numbered data file without a commit record (written by pyrosome?); readers see it but it cannot be audited")
			}
			return nil
		}
		seen[rel] = true
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // reported below as missing
		}
		if err != nil {
			return fmt.Errorf("verify %s: %w", name, err)
		}
		if info.Size() != fr.Bytes {
			rep.add(ProblemMutated, name, "size %d bytes, committed as %d", info.Size(), fr.Bytes)
			return nil
		}
		if !sampled(o.Seed, rel, o.Sample) {
			return nil
		}
		rep.CheckedFiles++
		sum, err := s.hashFile(ctx, name)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			delete(seen, rel)
		case err != nil:
			return err
		case sum != fr.SHA256:
			rep.add(ProblemMutated, name, "sha256 %s, committed as %s", sum, fr.SHA256)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, rel := range sortedKeys(expected) {
		if !seen[rel] {
			rep.add(ProblemMissing, p.join(rel), "listed by the commit record of %s index %d but not on disk", vname, indexOfPath(rel))
		}
	}
	return nil
}

// walkFiles calls fn for every file under dir (relative to the data
// directory), descending into non-hidden subdirectories, in name order.
func (s *Store) walkFiles(ctx context.Context, dir string, fn func(name string, e fs.DirEntry) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	entries, err := s.fs.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list %s: %w", dir, err)
	}
	for _, e := range entries {
		name := path.Join(dir, e.Name())
		if e.IsDir() {
			if strings.HasPrefix(e.Name(), ".") {
				continue
			}
			if err := s.walkFiles(ctx, name, fn); err != nil {
				return err
			}
			continue
		}
		if err := fn(name, e); err != nil {
			return err
		}
	}
	return nil
}

// hashFile streams a file into SHA-256.
func (s *Store) hashFile(ctx context.Context, name string) (string, error) {
	f, err := s.fs.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, ctxReader{ctx: ctx, r: f}); err != nil {
		return "", fmt.Errorf("hash %s: %w", name, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// ctxReader stops a long copy once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(b []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(b)
}

// sampled decides, deterministically from seed and path, whether a file is
// in the sample.
func sampled(seed int64, rel string, rate float64) bool {
	if rate <= 0 || rate >= 1 {
		return true
	}
	h := fnv.New64a()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(seed))
	h.Write(b[:])
	h.Write([]byte(rel))
	return float64(h.Sum64()>>11)/float64(1<<53) < rate
}

// versionAge is how long an uncommitted version directory has been left
// alone: the time since the newest of its .version.json creation time, its
// directory's and any of its files' modification times. A writer still
// streaming keeps it young. ok is false when the directory is gone.
func (s *Store) versionAge(ctx context.Context, vdir string, now time.Time) (time.Duration, bool) {
	info, err := s.fs.Stat(vdir)
	if err != nil {
		return 0, false
	}
	newest := info.ModTime()
	if b, err := s.fs.ReadFile(path.Join(vdir, versionInfoName)); err == nil {
		if vi, _, err := parseVersionInfo(b); err == nil && vi.Created.After(newest) {
			newest = vi.Created
		}
	}
	var walk func(dir string)
	walk = func(dir string) {
		entries, err := s.fs.ReadDir(dir)
		if err != nil || ctx.Err() != nil {
			return
		}
		for _, e := range entries {
			if fi, err := e.Info(); err == nil && fi.ModTime().After(newest) {
				newest = fi.ModTime()
			}
			if e.IsDir() {
				walk(path.Join(dir, e.Name()))
			}
		}
	}
	walk(vdir)
	age := now.Sub(newest)
	if age < 0 {
		age = 0
	}
	return age, true
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// indexOfPath is the index in a data file's name ("v0/a=1/3.parquet" → 3),
// or -1.
func indexOfPath(rel string) int {
	if i, _, ok := parseDataFile(path.Base(rel)); ok {
		return i
	}
	return -1
}
