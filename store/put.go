package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/csv"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/util"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// SchemaVersionKey is the Parquet key-value metadata key that carries the
// schema version in every data file.
const SchemaVersionKey = "quiver.schema_version"

// Footer keys of a put with a request id (see rollForward).
const (
	requestIDKey = "quiver.request_id"
	writerKey    = "quiver.writer"
	metadataKey  = "quiver.metadata"
)

// PutOptions describe one put.
type PutOptions struct {
	// Mode is ModeAppend (default) or ModeWrite.
	Mode Mode
	// PartitionBy names hive partition columns (write only; an append to a
	// profile that does not exist yet is a write and may set it too).
	PartitionBy []string
	// SchemaVersion is stamped into every file. An append inherits the
	// version's; a different one is an error.
	SchemaVersion string
	// Format is "parquet" (default) or "csv"; appends follow the profile.
	Format string
	// Metadata is copied into the commit record (a JSON object).
	Metadata json.RawMessage
	// Writer overrides the store's writer identity for this commit.
	Writer string
	// RequestID makes the put idempotent: a retried put with the same id
	// on the same profile returns the first put's commit record (Replayed
	// set) and writes nothing.
	RequestID string
	// TargetFileBytes (writes only; 0: no limit) starts a new file once one
	// has passed this many encoded bytes. All files of the put are still one
	// commit: at the version root they take indices 0, 1, 2…; under a
	// partition directory the n-th file of that partition takes index n.
	TargetFileBytes int64
}

// Put streams rdr into the profile named by keys, as one append or one new
// version, and returns the commit record. Nothing is visible until the whole
// stream has been written; if rdr fails or ctx ends first, nothing is
// committed and the temp files are removed.
func (s *Store) Put(ctx context.Context, keys []string, rdr array.RecordReader, o PutOptions) (*CommitRecord, error) {
	p, err := s.resolve(keys)
	if err != nil {
		return nil, err
	}
	if o.Mode == "" {
		o.Mode = ModeAppend
	}
	if o.Mode != ModeAppend && o.Mode != ModeWrite {
		return nil, fmt.Errorf("%w: mode %q (want append or write)", ErrInvalidArgument, o.Mode)
	}
	if len(o.Metadata) > 0 {
		var obj map[string]any
		if err := json.Unmarshal(o.Metadata, &obj); err != nil || obj == nil {
			return nil, fmt.Errorf("%w: metadata must be a JSON object", ErrInvalidArgument)
		}
	}
	if o.TargetFileBytes < 0 {
		return nil, fmt.Errorf("%w: negative target file size", ErrInvalidArgument)
	}
	if len(o.SchemaVersion) > 128 {
		return nil, fmt.Errorf("%w: schema version longer than 128 bytes", ErrInvalidArgument)
	}
	run := func() (*CommitRecord, error) {
		if o.Mode == ModeAppend {
			c, err := s.appendTo(ctx, p, rdr, o)
			if !errors.Is(err, errNoVersion) {
				return c, err
			}
		}
		return s.write(ctx, p, rdr, o)
	}
	if o.RequestID != "" {
		c, err := s.putOnce(ctx, p, o, run)
		if c != nil && c.Replayed {
			// Consume the client's stream before answering: a Flight
			// client that is still sending loses an early answer.
			for rdr.Next() && ctx.Err() == nil {
			}
		}
		return c, err
	}
	return run()
}

// Write is Put with ModeWrite.
func (s *Store) Write(ctx context.Context, keys []string, rdr array.RecordReader, o PutOptions) (*CommitRecord, error) {
	o.Mode = ModeWrite
	return s.Put(ctx, keys, rdr, o)
}

// Append is Put with ModeAppend.
func (s *Store) Append(ctx context.Context, keys []string, rdr array.RecordReader, o PutOptions) (*CommitRecord, error) {
	o.Mode = ModeAppend
	return s.Put(ctx, keys, rdr, o)
}

// errNoVersion: an append found nothing to append to and writes instead.
var errNoVersion = errors.New("no version to append to")

// target is where a put's files go.
type target struct {
	p           profile
	version     int
	format      Format
	schema      *arrow.Schema // full version schema
	partitionBy []string
	schemaVer   string
	plan        *conformPlan
}

func (s *Store) write(ctx context.Context, p profile, rdr array.RecordReader, o PutOptions) (*CommitRecord, error) {
	f, err := parseFormat(o.Format)
	if err != nil {
		return nil, err
	}
	sc := rdr.Schema()
	if err := checkUniqueNames(sc); err != nil {
		return nil, err
	}
	if err := checkPartitionBy(sc, o.PartitionBy); err != nil {
		return nil, err
	}
	if f == FormatCSV {
		if len(o.PartitionBy) > 0 {
			return nil, fmt.Errorf("%w: CSV profiles cannot be partitioned", ErrInvalidArgument)
		}
		if err := checkCSVTypes(sc); err != nil {
			return nil, err
		}
	}
	if err := s.checkFormatOf(p, f); err != nil {
		return nil, err
	}
	if ok, err := s.exists(p); err != nil {
		return nil, err
	} else if !ok {
		if err := s.checkCreatable(p); err != nil {
			return nil, err
		}
	}
	created := s.missingDirs(p)
	if err := s.fs.MkdirAll(p.dir); err != nil {
		return nil, fmt.Errorf("create profile %s: %w", p, err)
	}
	committed := false
	defer func() {
		if !committed {
			// A refused first write leaves no empty profile behind. Remove
			// only empty directories: another writer may be creating the
			// same profile.
			for _, d := range created {
				if s.fs.Remove(d) != nil {
					break
				}
			}
		}
	}()
	version, err := s.reserveVersion(p)
	if err != nil {
		return nil, err
	}
	vdir := p.join(VersionName(version))
	defer func() {
		if !committed {
			// The manifest never named this version: nobody else uses it.
			_ = s.fs.RemoveAll(vdir)
		}
	}()
	md := sc.Metadata()
	tsc := arrow.NewSchema(sc.Fields(), &md)
	vi := newVersionInfo(version, f, tsc, o.PartitionBy, o.SchemaVersion, s.opts.now(), s.writerOf(o))
	b, _ := json.MarshalIndent(vi, "", "  ")
	if err := s.fs.CreateExclusive(path.Join(vdir, versionInfoName), b); err != nil {
		return nil, fmt.Errorf("write %s %s: %w", p, VersionName(version), err)
	}
	t := &target{p: p, version: version, format: f, schema: tsc, partitionBy: o.PartitionBy, schemaVer: o.SchemaVersion,
		plan: &conformPlan{same: true}}
	c, err := s.stream(ctx, t, rdr, o, ModeWrite)
	if err != nil {
		return nil, err
	}
	if err := s.commitManifest(ctx, p, version); err != nil {
		// Keep the version only if the manifest names it after all (the
		// failure came after the rename); otherwise nobody will ever read
		// it and the client was told it failed.
		if cur, rerr := s.readManifest(p); rerr == nil && cur == version {
			committed = true
		}
		return nil, fmt.Errorf("commit %s %s: %w", p, VersionName(version), err)
	}
	committed = true
	return c, nil
}

// missingDirs lists the directories of a profile's path that do not exist
// yet, deepest first.
func (s *Store) missingDirs(p profile) []string {
	var out []string
	for i := len(p.keys); i > 0; i-- {
		d := path.Join(p.keys[:i]...)
		if _, err := s.fs.Stat(d); err == nil {
			break
		}
		out = append(out, d)
	}
	return out
}

// csvFloats writes floats as polars does, so a whole number stays a float
// when the CSV is read back ("1.0", not "1").
func csvFloats(typ arrow.DataType, col arrow.Array) ([]string, bool) {
	var get func(i int) float64
	switch c := col.(type) {
	case *array.Float64:
		get = c.Value
	case *array.Float32:
		get = func(i int) float64 { return float64(c.Value(i)) }
	default:
		return nil, false
	}
	bits := 64
	if typ.ID() == arrow.FLOAT32 {
		bits = 32
	}
	out := make([]string, col.Len())
	for i := range out {
		if col.IsNull(i) {
			continue
		}
		v := strconv.FormatFloat(get(i), 'g', -1, bits)
		if !strings.ContainsAny(v, ".eEnN") { // not 1.5, 1e+21, NaN, Inf
			v += ".0"
		}
		out[i] = v
	}
	return out, true
}

// reserveVersion claims the next vN directory with an atomic mkdir.
func (s *Store) reserveVersion(p profile) (int, error) {
	entries, err := s.fs.ReadDir(p.dir)
	if err != nil {
		return 0, fmt.Errorf("list %s: %w", p, err)
	}
	next := 0
	if vs := versionDirs(entries); len(vs) > 0 {
		next = vs[len(vs)-1] + 1
	}
	for ; ; next++ {
		err := s.fs.Mkdir(p.join(VersionName(next)))
		if err == nil {
			return next, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return 0, fmt.Errorf("create %s %s: %w", p, VersionName(next), err)
		}
	}
}

func (s *Store) appendTo(ctx context.Context, p profile, rdr array.RecordReader, o PutOptions) (*CommitRecord, error) {
	version, err := s.readManifest(p)
	if errors.Is(err, ErrNotFound) {
		return nil, errNoVersion
	}
	if err != nil {
		return nil, err
	}
	vs, err := s.versionHead(p, version)
	if err != nil {
		return nil, err
	}
	if vs.empty() {
		return nil, errNoVersion // pyrosome: appending to empty data writes instead
	}
	if o.Format != "" {
		f, err := parseFormat(o.Format)
		if err != nil {
			return nil, err
		}
		if f != vs.Format {
			return nil, fmt.Errorf("%w: %s holds %s files; cannot append %s (one format per profile)", ErrFormatMismatch, p, vs.Format, f)
		}
	}
	if o.PartitionBy != nil && strings.Join(o.PartitionBy, ",") != strings.Join(vs.PartitionBy, ",") {
		return nil, fmt.Errorf("%w: %s %s is partitioned by %s; an append cannot change that (write a new version)", ErrInvalidArgument, p, VersionName(version), quoteNames(vs.PartitionBy))
	}
	sv := vs.SchemaVersion
	if o.SchemaVersion != "" && o.SchemaVersion != sv {
		return nil, fmt.Errorf("%w: %s %s has schema version %q, not %q; write a new version for a new schema version", ErrSchemaMismatch, p, VersionName(version), sv, o.SchemaVersion)
	}
	what := fmt.Sprintf("%s %s", p, VersionName(version))
	plan, err := planConform(rdr.Schema(), vs.Schema, vs.Format == FormatParquet, what)
	if err != nil {
		return nil, err
	}
	t := &target{p: p, version: version, format: vs.Format, schema: vs.Schema, partitionBy: vs.PartitionBy, schemaVer: sv, plan: plan}
	return s.stream(ctx, t, rdr, o, ModeAppend)
}

func (s *Store) writerOf(o PutOptions) string {
	if o.Writer != "" {
		return o.Writer
	}
	return s.opts.writer
}

// sink is one output file of a put.
type sink struct {
	part   partKey
	seq    int // n-th file of its directory in this put
	tmp    TempFile
	h      hash.Hash
	n      int64 // bytes written
	rows   int64
	pw     *pqarrow.FileWriter
	cw     *csv.Writer
	closed bool
	ioErr  error // the first error of the file itself (disk full, …)
}

func (k *sink) Write(b []byte) (int, error) {
	n, err := k.tmp.Write(b)
	k.h.Write(b[:n])
	k.n += int64(n)
	if err != nil && k.ioErr == nil {
		k.ioErr = err
	}
	return n, err
}

// encodeErr classifies an error of the Parquet/CSV encoder: one that did
// not come from the disk is the data's fault (a type the format cannot
// hold) and so the client's.
func (k *sink) encodeErr(p profile, f Format, err error) error {
	if err == nil || k.ioErr != nil || errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return err
	}
	name := "Parquet"
	if f == FormatCSV {
		name = "CSV"
	}
	return fmt.Errorf("%w: %s: the data cannot be stored as %s: %v", ErrInvalidArgument, p, name, err)
}

// stream writes rdr through t.plan into one sink per partition, then claims
// an index and publishes the files and the commit record.
func (s *Store) stream(ctx context.Context, t *target, rdr array.RecordReader, o PutOptions, mode Mode) (*CommitRecord, error) {
	vdir := t.p.join(VersionName(t.version))
	fileSchema := t.schema
	var partIdx []int
	if len(t.partitionBy) > 0 {
		keep := make([]arrow.Field, 0, t.schema.NumFields())
		for i, f := range t.schema.Fields() {
			if slices.Contains(t.partitionBy, f.Name) {
				continue
			}
			keep = append(keep, t.schema.Field(i))
		}
		for _, c := range t.partitionBy {
			partIdx = append(partIdx, t.schema.FieldIndices(c)[0])
		}
		md := t.schema.Metadata()
		fileSchema = arrow.NewSchema(keep, &md)
	}
	var props *parquet.WriterProperties
	if t.format == FormatParquet {
		props = s.parquetProps(fileSchema, len(partIdx) > 0)
	}
	sinks := map[string]*sink{} // the open file of each directory
	seqs := map[string]int{}    // files started per directory
	var order []*sink
	var total int64
	abort := func(err error) (*CommitRecord, error) {
		for _, k := range order {
			if !k.closed {
				if k.pw != nil {
					_ = k.pw.Close()
				}
			}
			_ = k.tmp.Abort()
		}
		return nil, err
	}
	open := func(dir string) (*sink, error) {
		if k, ok := sinks[dir]; ok {
			return k, nil
		}
		if len(sinks) >= s.opts.partitionLimit {
			return nil, fmt.Errorf("%w: a put may touch at most %d partitions", ErrInvalidArgument, s.opts.partitionLimit)
		}
		fdir := vdir
		k := &sink{h: sha256.New(), seq: seqs[dir]}
		seqs[dir]++
		if dir != "" {
			fdir = path.Join(vdir, dir)
			if err := s.fs.MkdirAll(fdir); err != nil {
				return nil, fmt.Errorf("create partition of %s: %w", t.p, err)
			}
			vals, err := parsePartitionDir(dir)
			if err != nil {
				return nil, err
			}
			k.part = partKey{dir: dir, values: vals}
		}
		tmp, err := s.fs.CreateTemp(fdir, "."+t.format.ext())
		if err != nil {
			return nil, fmt.Errorf("write %s: %w", t.p, err)
		}
		k.tmp = tmp
		if t.format == FormatCSV {
			k.cw = csv.NewWriter(k, fileSchema, csv.WithHeader(true), csv.WithNullWriter(""), csv.WithCustomTypeConverter(csvFloats))
		} else {
			k.pw, err = pqarrow.NewFileWriter(fileSchema, k, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema(), pqarrow.WithAllocator(s.opts.mem)))
			if err != nil {
				_ = tmp.Abort()
				return nil, fmt.Errorf("%w: %s cannot be stored as Parquet: %v", ErrInvalidArgument, t.p, err)
			}
			if err := k.pw.AppendKeyValueMetadata(SchemaVersionKey, t.schemaVer); err != nil {
				_ = tmp.Abort()
				return nil, err
			}
			if o.RequestID != "" {
				// Lets a retry recognise this file if the writer died
				// between publishing it and writing its commit record.
				for _, kv := range [][2]string{{requestIDKey, o.RequestID}, {writerKey, s.writerOf(o)}, {metadataKey, string(o.Metadata)}} {
					if err := k.pw.AppendKeyValueMetadata(kv[0], kv[1]); err != nil {
						_ = tmp.Abort()
						return nil, err
					}
				}
			}
		}
		sinks[dir] = k
		order = append(order, k)
		return k, nil
	}
	writeTo := func(k *sink, rec arrow.RecordBatch) error {
		before := k.n
		k.rows += rec.NumRows()
		if k.cw != nil {
			if err := k.cw.Write(rec); err != nil {
				return k.encodeErr(t.p, t.format, err)
			}
			if err := k.cw.Flush(); err != nil {
				return k.encodeErr(t.p, t.format, err)
			}
		} else {
			if err := k.pw.WriteBuffered(rec); err != nil {
				return k.encodeErr(t.p, t.format, err)
			}
			if k.pw.RowGroupTotalBytesWritten() >= s.opts.rowGroupBytes/int64(max(1, len(sinks))) {
				if err := k.pw.NewBufferedRowGroupChecked(); err != nil {
					return k.encodeErr(t.p, t.format, err)
				}
			}
		}
		total += k.n - before
		if s.opts.maxPutBytes > 0 && total > s.opts.maxPutBytes {
			return fmt.Errorf("%w: %s: more than %d bytes in one put", ErrTooLarge, t.p, s.opts.maxPutBytes)
		}
		if o.TargetFileBytes > 0 && mode == ModeWrite && k.pw != nil && k.n+k.pw.RowGroupTotalBytesWritten() >= o.TargetFileBytes {
			// Roll over: the next rows of this directory start a new file.
			k.closed = true
			delete(sinks, k.part.dir)
			if err := k.pw.Close(); err != nil {
				return k.encodeErr(t.p, t.format, err)
			}
		}
		return nil
	}
	root := func() (*sink, error) { return open("") }
	if len(partIdx) == 0 {
		if _, err := root(); err != nil {
			return abort(err)
		}
	}
	var inBytes int64
	for rdr.Next() {
		if err := ctx.Err(); err != nil {
			return abort(err)
		}
		// The limit counts what the client sent (Arrow bytes), checked
		// before anything of the batch is written.
		inBytes += util.TotalRecordSize(rdr.RecordBatch())
		if s.opts.maxPutBytes > 0 && inBytes > s.opts.maxPutBytes {
			return abort(fmt.Errorf("%w: %s: more than %d bytes in one put", ErrTooLarge, t.p, s.opts.maxPutBytes))
		}
		rec, err := t.plan.apply(ctx, rdr.RecordBatch())
		if err != nil {
			return abort(fmt.Errorf("%w: %s: %v", ErrSchemaMismatch, t.p, err))
		}
		if len(partIdx) == 0 {
			fb := toFileBatch(rec, fileSchema)
			k, werr := root()
			if werr == nil {
				werr = writeTo(k, fb)
			}
			fb.Release()
			rec.Release()
			if werr != nil {
				return abort(wrapWrite(t.p, werr))
			}
			continue
		}
		dirs, parts, err := splitByPartition(ctx, rec, partIdx, t.partitionBy)
		rec.Release()
		if err != nil {
			return abort(err)
		}
		var werr error
		for i, d := range dirs {
			if werr == nil {
				var k *sink
				if k, werr = open(d); werr == nil {
					fb := dropColumns(parts[i], fileSchema, partIdx)
					werr = writeTo(k, fb)
					fb.Release()
				}
			}
			parts[i].Release()
		}
		if werr != nil {
			return abort(wrapWrite(t.p, werr))
		}
	}
	if err := rdr.Err(); err != nil {
		return abort(fmt.Errorf("%w: put to %s: %w", ErrBadStream, t.p, err))
	}
	if err := ctx.Err(); err != nil {
		return abort(err)
	}
	for _, k := range order {
		if k.closed {
			continue
		}
		if k.cw != nil && k.rows == 0 {
			// An empty CSV still needs its header row.
			cols := emptyColumns(fileSchema)
			empty := array.NewRecordBatch(fileSchema, cols, 0)
			releaseAll(cols)
			err := k.cw.Write(empty)
			empty.Release()
			if err == nil {
				err = k.cw.Flush()
			}
			if err != nil {
				return abort(wrapWrite(t.p, err))
			}
		}
		if k.pw != nil {
			if err := k.pw.Close(); err != nil {
				k.closed = true
				return abort(wrapWrite(t.p, k.encodeErr(t.p, t.format, err)))
			}
		}
		k.closed = true
	}
	return s.publish(ctx, t, order, o, mode, abort)
}

func wrapWrite(p profile, err error) error {
	if errors.Is(err, ErrTooLarge) || errors.Is(err, ErrInvalidArgument) || errors.Is(err, ErrSchemaMismatch) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("write %s: %w", p, err)
}

// publish claims the index, moves the files into place and writes the
// commit record.
func (s *Store) publish(ctx context.Context, t *target, order []*sink, o PutOptions, mode Mode, abort func(error) (*CommitRecord, error)) (*CommitRecord, error) {
	vname := VersionName(t.version)
	vdir := t.p.join(vname)
	idx := 0
	if mode == ModeAppend {
		var err error
		if idx, err = s.claimIndex(t.p, t.version, t.format); err != nil {
			return abort(err)
		}
	}
	// Files in a stable order: root first, then partitions by path, each
	// directory's files in the order written.
	sort.SliceStable(order, func(i, j int) bool {
		if order[i].part.dir != order[j].part.dir {
			return order[i].part.dir < order[j].part.dir
		}
		return order[i].seq < order[j].seq
	})
	// A write split into several files per directory takes the next indices
	// too; nobody else can claim them in a version the manifest does not
	// name yet.
	for _, k := range order {
		if k.seq > 0 && mode == ModeWrite {
			if err := s.fs.CreateExclusive(path.Join(vdir, claimName(idx+k.seq, t.format)), nil); err != nil && !errors.Is(err, fs.ErrExist) {
				return abort(fmt.Errorf("claim index in %s %s: %w", t.p, vname, err))
			}
		}
	}
	c := &CommitRecord{
		Path: ProfilePath(t.p.keys), Keys: t.p.keys, Version: vname, Index: idx, Mode: mode, Format: t.format,
		SchemaVersion: t.schemaVer, Writer: s.writerOf(o), RequestID: o.RequestID, Metadata: o.Metadata,
		Files: []FileRecord{},
	}
	// If anything fails from here on, the files already published are
	// removed again: nobody was told of them, and a client's retry must not
	// find their rows twice.
	var published []string
	unpublish := func(err error) (*CommitRecord, error) {
		for _, name := range published {
			if rerr := s.fs.Remove(name); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				s.opts.log.Error().Err(rerr).Str("profile", t.p.String()).Msg("could not remove a published file of a failed put; verify reports it as unrecorded")
			}
		}
		return abort(err)
	}
	for _, k := range order {
		rel := path.Join(k.part.dir, dataFileName(idx+k.seq, t.format))
		if err := k.tmp.Publish(path.Join(vdir, rel), false, true); err != nil {
			return unpublish(fmt.Errorf("publish %s %s: %w", t.p, vname, err))
		}
		published = append(published, path.Join(vdir, rel))
		c.Files = append(c.Files, FileRecord{Path: path.Join(vname, rel), Rows: k.rows, Bytes: k.n, SHA256: hex.EncodeToString(k.h.Sum(nil)), Partition: k.part.values})
		c.Rows += k.rows
	}
	c.Committed = s.opts.now().UTC()
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return unpublish(err)
	}
	if err := s.fs.CreateExclusive(path.Join(vdir, commitName(idx)), b); err != nil {
		if errors.Is(err, fs.ErrExist) {
			// A retry rolled this put forward (we were taken for dead):
			// the record lists our files, which must stay.
			return nil, fmt.Errorf("commit %s %s index %d: committed meanwhile by a retry: %w", t.p, vname, idx, err)
		}
		return unpublish(fmt.Errorf("commit %s %s index %d: %w", t.p, vname, idx, err))
	}
	return c, nil
}

// claimIndex claims the next free index of a version by exclusively
// creating its .claim marker. Markers are never deleted.
func (s *Store) claimIndex(p profile, version int, f Format) (int, error) {
	vdir := p.join(VersionName(version))
	entries, err := s.fs.ReadDir(vdir)
	if err != nil {
		return 0, fmt.Errorf("list %s %s: %w", p, VersionName(version), err)
	}
	next := 0
	for _, e := range entries {
		name := e.Name()
		if i, _, ok := parseDataFile(name); ok && i+1 > next {
			next = i + 1
		}
		if i, ok := parseIndexed(claimRe, name); ok && i+1 > next {
			next = i + 1
		}
		if i, ok := parseIndexed(commitRe, name); ok && i+1 > next {
			next = i + 1
		}
	}
	for ; ; next++ {
		err := s.fs.CreateExclusive(path.Join(vdir, claimName(next, f)), nil)
		if err == nil {
			return next, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return 0, fmt.Errorf("claim index in %s %s: %w", p, VersionName(version), err)
		}
	}
}

// parquetProps are the writer properties for files of schema sc.
// Dictionary encoding is on for byte-array columns (strings, binaries) only:
// for numbers arrow-go's dictionary hashing costs half of the write time
// and rarely pays.
//
// A partitioned put keeps one open writer per partition, and each column of
// each writer buffers its current data page (and dictionary) uncompressed
// until the page is full; with the 1 MiB defaults a 64-partition put of 20
// columns held over 2 GB that way. Partitioned writes use 64 KiB pages and
// 256 KiB dictionaries instead.
func (s *Store) parquetProps(sc *arrow.Schema, partitioned bool) *parquet.WriterProperties {
	opts := []parquet.WriterProperty{
		parquet.WithCompression(compress.Codecs.Zstd),
		// Level 1, as pyarrow/Arrow C++ default to: arrow-go's default
		// (3) spent half of a put's CPU time compressing, for ~5% smaller
		// files.
		parquet.WithCompressionLevel(1),
		parquet.WithMaxRowGroupLength(s.opts.rowGroupRows),
		parquet.WithAllocator(s.opts.mem),
		parquet.WithStats(true),
		parquet.WithDictionaryDefault(false),
		parquet.WithCreatedBy("quiver"),
	}
	if partitioned {
		opts = append(opts, parquet.WithDataPageSize(64<<10), parquet.WithDictionaryPageSizeLimit(256<<10))
	}
	if pqs, err := pqarrow.ToParquet(sc, parquet.NewWriterProperties(opts...), pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema())); err == nil {
		for i := 0; i < pqs.NumColumns(); i++ {
			c := pqs.Column(i)
			if c.PhysicalType() == parquet.Types.ByteArray || c.PhysicalType() == parquet.Types.FixedLenByteArray {
				opts = append(opts, parquet.WithDictionaryPath(c.ColumnPath(), true))
			}
		}
	}
	return parquet.NewWriterProperties(opts...)
}

// toFileBatch relabels rec with the file schema (same columns).
func toFileBatch(rec arrow.RecordBatch, sc *arrow.Schema) arrow.RecordBatch {
	if rec.Schema().Equal(sc) {
		rec.Retain()
		return rec
	}
	return array.NewRecordBatch(sc, rec.Columns(), rec.NumRows())
}

// dropColumns removes the partition columns. The result must be released.
func dropColumns(rec arrow.RecordBatch, sc *arrow.Schema, drop []int) arrow.RecordBatch {
	cols := make([]arrow.Array, 0, sc.NumFields())
	for i, c := range rec.Columns() {
		if !slices.Contains(drop, i) {
			cols = append(cols, c)
		}
	}
	return array.NewRecordBatch(sc, cols, rec.NumRows())
}

func emptyColumns(sc *arrow.Schema) []arrow.Array {
	cols := make([]arrow.Array, sc.NumFields())
	for i, f := range sc.Fields() {
		cols[i] = array.MakeArrayOfNull(memory.DefaultAllocator, f.Type, 0)
	}
	return cols
}

func releaseAll(arrs []arrow.Array) {
	for _, a := range arrs {
		if a != nil {
			a.Release()
		}
	}
}
