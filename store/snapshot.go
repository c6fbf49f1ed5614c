package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/quiverdb/quiver/store/codec"
	"github.com/quiverdb/quiver/store/filter"
	"github.com/quiverdb/quiver/store/fsys"
)

// Snapshot is a pinned view of one version: exactly these files, this
// schema. A reader given a snapshot sees nothing written after it was
// taken.
type Snapshot struct {
	Keys          []string
	Version       int
	Format        Format
	Schema        *arrow.Schema // full schema, partition columns included
	PartitionBy   []string
	SchemaVersion string
	Created       time.Time // from .version.json; zero for pyrosome versions
	Files         []DataFile
	Records       []*CommitRecord
	// Filter is the row filter of the read, bound to Schema (nil: every
	// row); Files holds only those whose partition values may pass it.
	Filter *filter.Bound
}

// Path is the profile's slash-joined name.
func (sn *Snapshot) Path() string { return ProfilePath(sn.Keys) }

// Rows is the total of the files' rows (-1 if any is unknown).
func (sn *Snapshot) Rows() int64 { return rowsOf(sn.Files) }

// Bytes is the total size of the files.
func (sn *Snapshot) Bytes() int64 {
	var n int64
	for _, f := range sn.Files {
		n += f.Bytes
	}
	return n
}

// SnapshotOptions select what a snapshot holds.
type SnapshotOptions struct {
	// Version is the version number, or -1 (Latest) for the latest.
	Version int
	// Partition keeps only files whose partition values match: for each
	// column, one of the values (hive text; "__HIVE_DEFAULT_PARTITION__" is
	// null).
	Partition map[string][]string
	// Files pins exact files (paths relative to the profile directory), as
	// a planned endpoint does. Every one must still exist in the version.
	Files []string
	// CSVTypes, for a read of pinned files of a CSV version, gives every
	// column of the version its type by name ("int64", "float64", "bool",
	// "string": codec.CSVType), as a planned endpoint's ticket carries the
	// types of its plan: the read streams those rather than the types the
	// version's files give now (red team round 18's s05: an append to a
	// column of only nulls changed the type of the plan's endpoints). The
	// names must be exactly the version's columns, and the pinned files'
	// values must fit the types (ErrInvalidArgument). Nil: the version's
	// types.
	CSVTypes map[string]string
	// Filter keeps only the rows for which it is true; files whose
	// partition values rule it out are left out of the snapshot. A column
	// it names that does not exist, or a literal of another type, is
	// ErrInvalidArgument.
	Filter *filter.Expr
}

// Latest is the version number that means "the newest one".
const Latest = -1

// Snapshot resolves a version and the files a read of it would stream,
// pruning partitions before any file is opened.
func (s *Store) Snapshot(ctx context.Context, keys []string, o SnapshotOptions) (*Snapshot, error) {
	p, err := s.resolve(keys)
	if err != nil {
		return nil, err
	}
	vs, err := s.readableVersion(ctx, p, o.Version)
	if err != nil {
		return nil, err
	}
	sn := &Snapshot{Keys: p.keys, Version: vs.Version, Format: vs.Format, Schema: vs.Schema, PartitionBy: vs.PartitionBy,
		SchemaVersion: vs.SchemaVersion, Created: vs.Created, Files: vs.Files, Records: vs.Records}
	if len(o.Partition) > 0 {
		if sn.Files, err = filterPartitions(sn, o.Partition); err != nil {
			return nil, err
		}
	}
	if o.Files != nil {
		have := map[string]DataFile{}
		for _, f := range sn.Files {
			have[f.Path] = f
		}
		pinned := make([]DataFile, 0, len(o.Files))
		for _, f := range o.Files {
			df, ok := have[f]
			if !ok {
				return nil, fmt.Errorf("%w: %s has no committed file %q in %s", ErrVersionNotFound, p, f, VersionName(vs.Version))
			}
			pinned = append(pinned, df)
		}
		sn.Files = pinned
	}
	if o.CSVTypes != nil {
		if err := s.pinCSVTypes(ctx, p, vs, sn, o); err != nil {
			return nil, err
		}
	}
	if o.Filter != nil {
		if err := s.bindFilter(sn, o.Filter); err != nil {
			return nil, err
		}
	}
	return sn, nil
}

// readableVersion loads version v (Latest: the manifest's) for a reader.
func (s *Store) readableVersion(ctx context.Context, p profile, v int) (*VersionState, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ps, stamp, latest, ok := s.pyroLatest(ctx, p)
	if ok {
		// A pyrosome profile unchanged since its last read: its manifest,
		// its lack of a log and of .quiver.kind are as they were.
		return s.readableLoaded(ctx, ps, v, latest)
	}
	latest, _, err := s.readManifest(ctx, p)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	if err != nil {
		// No manifest: a profile whose commit log holds writes (its
		// manifest deleted, or a first write killed before it) is read
		// from the log, as a lagging manifest is; the next commit writes
		// the manifest again. verify reports it missing. (Checked before
		// any profile state is made: reads of names that are no profile
		// must not grow the store's map.)
		if !s.loggedProfile(ctx, p) {
			return nil, err
		}
		latest = -1
	}
	manifest := latest
	ps = s.state(p)
	if err := s.syncLog(ctx, ps); err != nil {
		return nil, err
	}
	if latest, err = s.latestOf(ctx, ps, latest); err != nil {
		return nil, err
	}
	if manifest < 0 {
		// A newer pyrosome version than the log's last write may be the
		// latest: the log cannot say (red team round 33's q01).
		if err := s.checkNothingAbove(ctx, p, latest); err != nil {
			return nil, err
		}
	}
	s.notePyro(ctx, ps, stamp, manifest)
	return s.readableLoaded(ctx, ps, v, latest)
}

// pyroLatest is the latest version of a pyrosome profile (ok) when its
// directory and manifest are unchanged since a read noted them (notePyro)
// on a local disk; else their stamp to note after the read (zero: none to
// note). A profile with a commit log costs nothing here.
func (s *Store) pyroLatest(ctx context.Context, p profile) (ps *profileState, stamp pyroStamp, latest int, ok bool) {
	if !isLocal(s.fs) {
		return nil, pyroStamp{}, 0, false
	}
	s.mu.Lock()
	ps = s.profiles[p.dir]
	s.mu.Unlock()
	if ps != nil {
		ps.mu.Lock()
		logged := ps.log.head != 0
		ps.mu.Unlock()
		if logged {
			return nil, pyroStamp{}, 0, false
		}
	}
	dir, man, errMan, err := fsys.StatPair(ctx, s.fs, p.dir, manifestName)
	usable := err == nil && errMan == nil && dir.Dir && !man.Dir &&
		!stampOf(dir).IsZero() && time.Since(stampOf(dir)) >= racyListing && time.Since(stampOf(man)) >= racyListing
	if usable {
		stamp = pyroStamp{dir: stampOf(dir), manifest: stampOf(man), size: man.Size, mod: man.ModTime}
	}
	if ps == nil {
		return nil, stamp, 0, false
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if usable && !ps.pyro.stamp.IsZero() && ps.pyro.stamp.equal(stamp) && ps.log.head == 0 {
		return ps, stamp, ps.pyro.latest, true
	}
	// Changed (or too recent to tell): forget.
	ps.pyro = pyroFacts{}
	return nil, stamp, 0, false
}

// notePyro notes, after a read of a profile found no commit log and no
// .quiver.kind, the manifest's latest version under the stamp of the
// profile's directory and manifest (taken before the read).
func (s *Store) notePyro(ctx context.Context, ps *profileState, stamp pyroStamp, manifest int) {
	if stamp.IsZero() || manifest < 0 {
		return
	}
	ps.mu.Lock()
	head := ps.log.head
	ps.mu.Unlock()
	if head != 0 {
		return
	}
	// No log read, but is there a log directory (a log whose segments
	// are yet to come would not change the profile's directory)?
	if _, err := s.fs.Stat(ctx, ps.p.join(logDir)); !isNotExist(err) {
		return
	}
	if _, err := s.fs.Stat(ctx, ps.p.join(kindName)); !isNotExist(err) {
		return
	}
	ps.mu.Lock()
	ps.pyro = pyroFacts{stamp: stamp, latest: manifest}
	ps.mu.Unlock()
}

// readableLoaded is readableVersion once the profile's latest version is
// known.
func (s *Store) readableLoaded(ctx context.Context, ps *profileState, v, latest int) (*VersionState, error) {
	p := ps.p
	if v < 0 {
		v = latest
	}
	vs, err := s.loadVersion(ctx, ps, v, latest, loadRead)
	if err != nil {
		return nil, err
	}
	switch {
	case vs.Retired != nil:
		return nil, fmt.Errorf("%w: %s %s was removed by retention", ErrVersionNotFound, p, VersionName(v))
	case !vs.Committed && v != latest:
		return nil, fmt.Errorf("%w: %s %s was never committed", ErrVersionNotFound, p, VersionName(v))
	case !vs.Committed && vs.Info != nil:
		// The manifest names a version Quiver never committed.
		return nil, fmt.Errorf("%w: %s: the manifest names %s, which has no commit record", ErrDataLoss, p, VersionName(v))
	case vs.Write == nil && vs.Info == nil && len(vs.Files) == 0 && len(vs.Records) == 0 && (hasWrites(ps) || s.quiverBelow(ctx, ps, v)):
		// Not a version pyrosome wrote either (its writes always leave a
		// data file): the manifest was pointed at an empty directory,
		// which would hide every committed row. (With the log gone too,
		// a version below that Quiver wrote says whose profile it is:
		// red team round 36's s11.)
		return nil, fmt.Errorf("%w: %s: the manifest names %s, which holds no data file and no commit record", ErrDataLoss, p, VersionName(v))
	}
	return vs, nil
}

// quiverBelow reports whether a version below v holds what Quiver writes:
// its .version.json, or data files Quiver wrote whose .version.json and
// records were removed (a load of it answers DataLoss). Only an empty
// latest version with no commit log asks it.
func (s *Store) quiverBelow(ctx context.Context, ps *profileState, v int) bool {
	entries, err := s.fs.List(ctx, ps.p.dir)
	if err != nil {
		return false
	}
	for _, u := range versionDirs(entries) {
		if u >= v {
			continue
		}
		if _, err := s.fs.Stat(ctx, path.Join(ps.p.vdir(u), versionInfoName)); err == nil {
			return true
		}
		if _, err := s.loadVersion(ctx, ps, u, v, loadRead); errors.Is(err, ErrDataLoss) {
			return true
		}
	}
	return false
}

// latestOf is the version readers take as the latest: the manifest's, or a
// newer one the log says a write committed whose manifest move was lost (a
// writer killed between the two; the next commit moves the manifest), so
// that a read never returns a version older than one already committed. A
// profile Quiver created whose commit log is gone is DataLoss.
func (s *Store) latestOf(ctx context.Context, ps *profileState, manifest int) (int, error) {
	ps.mu.Lock()
	mw, head := ps.log.maxWrite(), ps.log.head
	retired := mw >= 0 && ps.log.retired[mw] != nil
	ps.mu.Unlock()
	if head == 0 {
		b, _, err := s.fs.ReadFile(ctx, ps.p.join(kindName))
		if err == nil && strings.TrimSpace(string(b)) == kindProfile {
			return 0, fmt.Errorf("%w: %s: the profile's commit log is missing", ErrDataLoss, ps.p)
		}
	}
	if mw > manifest && !retired {
		return mw, nil
	}
	return manifest, nil
}

func filterPartitions(sn *Snapshot, filter map[string][]string) ([]DataFile, error) {
	want := map[string]map[string]bool{}
	for col, vals := range filter {
		if !slices.Contains(sn.PartitionBy, col) {
			if len(sn.PartitionBy) == 0 {
				return nil, fmt.Errorf("%w: %s %s is not partitioned; cannot filter on %q", ErrInvalidArgument, sn.Path(), VersionName(sn.Version), col)
			}
			return nil, fmt.Errorf("%w: %q is not a partition column of %s %s (partitioned by %s)", ErrInvalidArgument, col, sn.Path(), VersionName(sn.Version), codec.QuoteNames(sn.PartitionBy))
		}
		dt := sn.Schema.Field(sn.Schema.FieldIndices(col)[0]).Type
		set := map[string]bool{}
		for _, v := range vals {
			cv, err := codec.CanonicalPartValue(dt, v)
			if err != nil {
				return nil, fmt.Errorf("%w: partition value %q is not a valid %s for %q", ErrInvalidArgument, v, dt, col)
			}
			set[cv] = true
		}
		want[col] = set
	}
	out := make([]DataFile, 0, len(sn.Files))
	for _, f := range sn.Files {
		ok := true
		for col, set := range want {
			v, has := f.Partition[col]
			if !has {
				v = codec.HiveDefault
			}
			if !set[v] {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, f)
		}
	}
	return out, nil
}

// openData opens a committed data file for reading and checks it against
// its record: a file that is gone or has another size fails with
// ErrDataLoss (ErrVersionNotFound if retention removed its version), and
// with verify set its SHA-256 is checked before anything of it is read.
func (s *Store) openData(ctx context.Context, p profile, df DataFile, verify bool) (fsys.File, error) {
	f, err := s.fs.Open(ctx, p.join(df.Path))
	if err != nil {
		return nil, s.openErr(ctx, p, df, err)
	}
	if df.Recorded && f.Size() != df.Bytes {
		f.Close()
		return nil, fmt.Errorf("%w: %s: committed file %s has %d bytes, its commit record says %d", ErrDataLoss, p, df.Path, f.Size(), df.Bytes)
	}
	if verify && df.Recorded {
		h := sha256.New()
		_, err := io.Copy(h, io.NewSectionReader(f, 0, f.Size()))
		if err == nil {
			if sum := hex.EncodeToString(h.Sum(nil)); sum != df.SHA256 {
				err = fmt.Errorf("%w: %s: committed file %s hashes to %s, its commit record says %s", ErrDataLoss, p, df.Path, sum, df.SHA256)
			}
		}
		if err != nil {
			f.Close()
			return nil, err
		}
	}
	return f, nil
}

// retiredNow reports whether the version of a profile-relative file path
// has been retired (refreshing the log to know).
func (s *Store) retiredNow(ctx context.Context, p profile, rel string) bool {
	v, ok := parseVersionDir(firstElem(rel))
	if !ok {
		return false
	}
	ps := s.state(p)
	if s.syncLog(ctx, ps) != nil {
		return false
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.log.retired[v] != nil
}

func firstElem(rel string) string {
	for i := 0; i < len(rel); i++ {
		if rel[i] == '/' {
			return rel[:i]
		}
	}
	return rel
}

// checkRows compares a Parquet file's row count with its record's.
func (s *Store) checkRows(p profile, df DataFile, rows int64, columns int) error {
	if df.Recorded && df.Rows >= 0 && rows != df.Rows && columns > 0 {
		// (A file of a table without columns records no rows: the
		// record's count is the truth there.)
		return fmt.Errorf("%w: %s: committed file %s holds %d rows, its commit record says %d", ErrDataLoss, p, df.Path, rows, df.Rows)
	}
	return nil
}

// badFile is the error for a data file that does not decode: a committed
// one has been altered (its record vouched for it).
func (s *Store) badFile(p profile, df DataFile, err error) error {
	if errors.Is(err, fsys.ErrUnavailable) {
		return err // the storage did not answer: nothing is known of the file
	}
	if df.Recorded {
		return fmt.Errorf("%w: %s: committed file %s does not decode: %v", ErrDataLoss, p, df.Path, err)
	}
	return &CorruptionError{Path: p.join(df.Path), Err: err}
}

// loggedProfile reports whether p, whose manifest is missing, is a profile
// Quiver created (.quiver.kind) whose commit log holds a write. Only such
// a directory gets a profile state (a listing meets many that are not).
func (s *Store) loggedProfile(ctx context.Context, p profile) bool {
	b, _, err := s.fs.ReadFile(ctx, p.join(kindName))
	if err != nil || strings.TrimSpace(string(b)) != kindProfile {
		return false
	}
	ps := s.state(p)
	return s.syncLog(ctx, ps) == nil && hasWrites(ps)
}

// hasWrites reports whether the profile's commit log holds a write.
func hasWrites(ps *profileState) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.log.maxWrite() >= 0
}
