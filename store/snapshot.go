package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// DataFile is one committed, visible data file of a version. Path is
// relative to the profile directory ("v1/region=eu/0.parquet").
type DataFile struct {
	Path      string            `json:"path"`
	Index     int               `json:"index"`
	Rows      int64             `json:"rows"` // -1 when unknown (a CSV file no record lists)
	Bytes     int64             `json:"bytes"`
	SHA256    string            `json:"sha256,omitempty"`
	Partition map[string]string `json:"partition,omitempty"`
}

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
}

// Path is the profile's slash-joined name.
func (sn *Snapshot) Path() string { return ProfilePath(sn.Keys) }

// Rows is the total of the files' rows (-1 if any is unknown).
func (sn *Snapshot) Rows() int64 {
	var n int64
	for _, f := range sn.Files {
		if f.Rows < 0 {
			return -1
		}
		n += f.Rows
	}
	return n
}

// Bytes is the total size of the files.
func (sn *Snapshot) Bytes() int64 {
	var n int64
	for _, f := range sn.Files {
		n += f.Bytes
	}
	return n
}

// versionState is what a version directory holds.
type versionState struct {
	Snapshot
	info      *VersionInfo
	committed bool // known to hold a commit without listing it (versionHead)
}

func (vs *versionState) empty() bool {
	return !vs.committed && len(vs.Files) == 0 && len(vs.Records) == 0
}

// versionState lists and parses one version: its info, commit records and
// visible files in index order.
func (s *Store) versionState(p profile, version int) (*versionState, error) {
	vname := VersionName(version)
	vdir := p.join(vname)
	entries, err := s.fs.ReadDir(vdir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s has no version %s", ErrVersionNotFound, p, vname)
	}
	if err != nil {
		return nil, fmt.Errorf("list %s %s: %w", p, vname, err)
	}
	vi, sc, err := s.readVersionInfo(p, version)
	if err != nil {
		return nil, err
	}
	recs, err := s.commitRecords(p, version, entries)
	if err != nil {
		return nil, err
	}
	vs := &versionState{Snapshot: Snapshot{Keys: p.keys, Version: version, Records: recs}, info: vi}
	if uncommittedWrite(entries) {
		// A write that never committed (killed, or still running): its
		// files are nobody's data yet.
		vs.Records = nil
		return vs, nil
	}
	byPath := map[string]FileRecord{}
	for _, r := range recs {
		for _, f := range r.Files {
			byPath[f.Path] = f
		}
	}
	formats := map[Format]bool{}
	type rootFile struct {
		idx  int
		name string
	}
	var roots []rootFile
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		if i, f, ok := parseDataFile(e.Name()); ok {
			formats[f] = true
			roots = append(roots, rootFile{i, e.Name()})
		}
	}
	if len(formats) > 1 {
		return nil, fmt.Errorf("%w: %s %s holds both parquet and csv files; one format per profile", ErrFormatMismatch, p, vname)
	}
	sort.Slice(roots, func(i, j int) bool { return roots[i].idx < roots[j].idx })
	for _, rf := range roots {
		rel := path.Join(vname, rf.name)
		df := DataFile{Path: rel, Index: rf.idx, Rows: -1}
		if fr, ok := byPath[rel]; ok {
			df.Rows, df.Bytes, df.SHA256 = fr.Rows, fr.Bytes, fr.SHA256
		} else if info, err := s.fs.Stat(p.join(rel)); err == nil {
			df.Bytes = info.Size()
		}
		vs.Files = append(vs.Files, df)
	}
	// Files under partition directories are visible only through a record.
	for _, r := range recs {
		for _, f := range r.Files {
			if strings.Count(f.Path, "/") < 2 {
				continue
			}
			vs.Files = append(vs.Files, DataFile{Path: f.Path, Index: r.Index, Rows: f.Rows, Bytes: f.Bytes, SHA256: f.SHA256, Partition: f.Partition})
		}
	}
	sort.SliceStable(vs.Files, func(i, j int) bool { return vs.Files[i].Index < vs.Files[j].Index })
	switch {
	case vi != nil:
		vs.Format, vs.Schema, vs.PartitionBy, vs.SchemaVersion, vs.Created = vi.Format, sc, vi.PartitionBy, vi.SchemaVersion, vi.Created
		if len(formats) == 1 && !formats[vi.Format] {
			return nil, fmt.Errorf("%w: %s %s is a %s version but holds other files", ErrFormatMismatch, p, vname, vi.Format)
		}
	case len(formats) == 1:
		for f := range formats {
			vs.Format = f
		}
	case len(recs) > 0:
		vs.Format = recs[0].Format
	default:
		vs.Format = FormatParquet
	}
	if vs.Format == FormatParquet {
		// A root file no record lists is visible by the pyrosome rule when
		// pyrosome wrote it; one Quiver wrote (its footer says so) is an
		// append that never committed — its writer died between publishing
		// it and writing its record — and stays invisible, as under
		// partition directories.
		kept := vs.Files[:0]
		for _, f := range vs.Files {
			if f.Rows < 0 {
				rows, ours, err := s.parquetFooter(p.join(f.Path))
				if err != nil {
					return nil, err
				}
				if ours {
					continue
				}
				f.Rows = rows
			}
			kept = append(kept, f)
		}
		vs.Files = kept
	}
	if vs.Format == FormatCSV {
		// CSV stores no schema: types are inferred on read, as pyrosome's
		// CsvDal does, whatever the writer put.
		vs.Schema = nil
	}
	if vs.Schema == nil && len(vs.Files) > 0 {
		if vs.Schema, err = s.inferSchema(p, vs.Format, vs.Files); err != nil {
			return nil, err
		}
	}
	if vs.Schema == nil {
		vs.Schema = arrow.NewSchema(nil, nil)
	}
	return vs, nil
}

// versionHead is versionState without reading every commit record: what an
// append needs (schema, format, partitioning, schema version, emptiness).
// A version with a .version.json was committed with index 0 before the
// manifest named it, so it is never empty; only pyrosome's versions (and
// CSV versions, whose types are inferred) need their files listed.
func (s *Store) versionHead(p profile, version int) (*versionState, error) {
	vi, sc, err := s.readVersionInfo(p, version)
	if err != nil {
		return nil, err
	}
	if vi == nil || vi.Format == FormatCSV {
		return s.versionState(p, version)
	}
	if _, err := s.fs.Stat(p.join(VersionName(version), commitName(0))); err != nil {
		return s.versionState(p, version)
	}
	return &versionState{Snapshot: Snapshot{Keys: p.keys, Version: version, Format: vi.Format, Schema: sc,
		PartitionBy: vi.PartitionBy, SchemaVersion: vi.SchemaVersion, Created: vi.Created}, info: vi, committed: true}, nil
}

// inferSchema derives a version's schema from its files when it has no
// .version.json: the first Parquet file's, or CSV types inferred from all.
func (s *Store) inferSchema(p profile, f Format, files []DataFile) (*arrow.Schema, error) {
	if f == FormatCSV {
		return s.inferCSVSchema(p, files)
	}
	fr, closeFn, err := s.openParquet(p, files[0].Path, 0)
	if err != nil {
		return nil, err
	}
	defer closeFn()
	sc, err := fr.Schema()
	if err != nil {
		return nil, &CorruptionError{Path: p.join(files[0].Path), Err: err}
	}
	return stripFieldIDs(sc), nil
}

// parquetFooter reads a data file's footer (name relative to the data
// dir): its row count, and whether Quiver wrote it (every Quiver Parquet
// file carries SchemaVersionKey).
func (s *Store) parquetFooter(name string) (rows int64, ours bool, err error) {
	f, err := s.fs.Open(name)
	if err != nil {
		return 0, false, fmt.Errorf("open %s: %w", name, err)
	}
	defer f.Close()
	pr, err := file.NewParquetReader(f)
	if err != nil {
		return 0, false, &CorruptionError{Path: name, Err: err}
	}
	return pr.NumRows(), pr.MetaData().KeyValueMetadata().FindValue(SchemaVersionKey) != nil, nil
}

// openParquet opens a data file for streaming reads.
func (s *Store) openParquet(p profile, rel string, batchRows int64) (*pqarrow.FileReader, func(), error) {
	f, err := s.fs.Open(p.join(rel))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("%w: %s: file %s is gone (removed by retention?)", ErrVersionNotFound, p, rel)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("open %s %s: %w", p, rel, err)
	}
	props := parquet.NewReaderProperties(s.opts.mem)
	props.BufferedStreamEnabled = true
	props.BufferSize = 1 << 20
	pr, err := file.NewParquetReader(f, file.WithReadProps(props))
	if err != nil {
		f.Close()
		return nil, nil, &CorruptionError{Path: p.join(rel), Err: err}
	}
	fr, err := pqarrow.NewFileReader(pr, pqarrow.ArrowReadProperties{BatchSize: batchRows}, s.opts.mem)
	if err != nil {
		pr.Close()
		return nil, nil, &CorruptionError{Path: p.join(rel), Err: err}
	}
	return fr, func() { _ = pr.Close() }, nil
}

// SnapshotOptions select what a snapshot holds.
type SnapshotOptions struct {
	// Version is the version number, or -1 for the latest.
	Version int
	// Partition keeps only files whose partition values match: for each
	// column, one of the values (hive text; "__HIVE_DEFAULT_PARTITION__" is
	// null).
	Partition map[string][]string
	// Files pins exact files (paths relative to the profile directory), as
	// a planned endpoint does. Every one must still exist in the version.
	Files []string
}

// Snapshot resolves a version and the files a read of it would stream,
// pruning partitions before any file is opened.
func (s *Store) Snapshot(ctx context.Context, keys []string, o SnapshotOptions) (*Snapshot, error) {
	p, err := s.resolve(keys)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	version := o.Version
	if version < 0 {
		if version, err = s.readManifest(p); err != nil {
			return nil, err
		}
	} else if ok, err := s.exists(p); err != nil {
		return nil, err
	} else if !ok {
		return nil, s.notFound(p)
	}
	vs, err := s.versionState(p, version)
	if err != nil {
		return nil, err
	}
	if vs.empty() && o.Version >= 0 {
		// A directory a killed write reserved and never committed.
		return nil, fmt.Errorf("%w: %s %s was never committed", ErrVersionNotFound, p, VersionName(version))
	}
	sn := vs.Snapshot
	if len(o.Partition) > 0 {
		if sn.Files, err = filterPartitions(&sn, o.Partition); err != nil {
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
				return nil, fmt.Errorf("%w: %s has no committed file %q in %s", ErrVersionNotFound, p, f, VersionName(version))
			}
			pinned = append(pinned, df)
		}
		sn.Files = pinned
	}
	return &sn, nil
}

func filterPartitions(sn *Snapshot, filter map[string][]string) ([]DataFile, error) {
	want := map[string]map[string]bool{}
	for col, vals := range filter {
		if !slices.Contains(sn.PartitionBy, col) {
			if len(sn.PartitionBy) == 0 {
				return nil, fmt.Errorf("%w: %s %s is not partitioned; cannot filter on %q", ErrInvalidArgument, sn.Path(), VersionName(sn.Version), col)
			}
			return nil, fmt.Errorf("%w: %q is not a partition column of %s %s (partitioned by %s)", ErrInvalidArgument, col, sn.Path(), VersionName(sn.Version), quoteNames(sn.PartitionBy))
		}
		dt := sn.Schema.Field(sn.Schema.FieldIndices(col)[0]).Type
		set := map[string]bool{}
		for _, v := range vals {
			cv, err := canonicalPartValue(dt, v)
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
			if !set[f.Partition[col]] {
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
