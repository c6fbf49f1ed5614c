package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
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

	"github.com/quiverdb/quiver/store/fsys"
)

// SchemaVersionKey is the Parquet key-value metadata key that carries the
// schema version in every data file.
const SchemaVersionKey = "quiver.schema_version"

// Footer keys of a put with a request id: an auditor holding only the
// file can tell which request wrote it.
const (
	requestIDKey = "quiver.request_id"
	writerKey    = "quiver.writer"
)

// maxRequestID bounds a client-chosen request id.
const maxRequestID = 256

// maxRetarget bounds how often one put follows the profile to a newer
// version before giving up with ErrUnavailable.
const maxRetarget = 8

// PutOptions describe one put.
type PutOptions struct {
	// Mode is ModeAppend (default) or ModeWrite.
	Mode Mode
	// PartitionBy names hive partition columns (write only; an append to a
	// profile that does not exist yet creates it and may set it too).
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

	// carry, for compaction: the write must also hold every file
	// committed to carry.version after carry.seq (see Compact).
	carry *carryFrom
}

// carryFrom names the appends a compaction must carry into its version.
type carryFrom struct {
	version int
	seq     int64 // the log head when the compaction's snapshot was taken
}

// Put streams rdr into the profile named by keys, as one append or one new
// version, and returns the commit record. Nothing is visible to Quiver's
// readers until the commit (docs/architecture.md); if rdr fails or ctx
// ends first, nothing is committed and the files are removed.
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
	if len(o.RequestID) > maxRequestID {
		return nil, fmt.Errorf("%w: request_id longer than %d bytes", ErrInvalidArgument, maxRequestID)
	}
	if _, err := parseFormat(o.Format); err != nil {
		return nil, err
	}
	if err := checkIncomingSchema(rdr.Schema()); err != nil {
		return nil, err
	}
	ps := s.state(p)
	if o.RequestID != "" {
		if c, err := s.replay(ctx, ps, o.RequestID); c != nil || err != nil {
			if c != nil {
				// Consume the client's stream before answering: a Flight
				// client that is still sending loses an early answer.
				for rdr.Next() && ctx.Err() == nil {
				}
			}
			return c, err
		}
	}
	return s.put(ctx, ps, rdr, o, 0)
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

// replay returns the record of a committed put with this request id, or
// nil. A write found so must also be the latest version unless a later
// one superseded it: its writer may have died between its commit and the
// manifest move, which is finished here.
func (s *Store) replay(ctx context.Context, ps *profileState, id string) (*CommitRecord, error) {
	if err := s.syncLog(ctx, ps); err != nil {
		return nil, err
	}
	ps.mu.Lock()
	c := ps.log.byRequest[id]
	ps.mu.Unlock()
	if c == nil {
		return nil, nil
	}
	if c.Mode == ModeWrite {
		if err := s.settleManifest(ctx, ps); err != nil {
			return nil, err
		}
	}
	r := *c
	r.Replayed = true
	return &r, nil
}

// staged is a put whose files are written (under their final names,
// invisible to Quiver's readers) and which waits for its commit.
type staged struct {
	p       profile
	mode    Mode // ModeWrite: a new version; ModeAppend: files in an existing one
	create  bool // an append to a profile that did not exist: it reserved a version
	version int
	index   int
	format  Format
	schema  *arrow.Schema // the version's full schema
	by      []string
	schemaV string
	files   []FileRecord
	rows    int64
	o       PutOptions
	dirSeqs map[string]int // files started per directory, across stream calls
	// carryLocked: a compaction that lost to appends takes in the late
	// ones inside the commit cycle (holding the lock).
	carryLocked bool
	// claims are the indices this append claimed in its version.
	claims []int
}

// put runs one attempt of a put: choose the target, stream, commit; it
// re-targets to a newer version when the commit says so.
func (s *Store) put(ctx context.Context, ps *profileState, rdr array.RecordReader, o PutOptions, attempt int) (*CommitRecord, error) {
	p := ps.p
	latest, _, err := s.readManifest(ctx, p)
	missing := errors.Is(err, ErrNotFound)
	if err != nil && !missing {
		return nil, err
	}
	var st *staged
	switch {
	case o.Mode == ModeWrite || missing:
		st, err = s.stageVersion(ctx, ps, rdr, o, missing && o.Mode == ModeAppend)
	default:
		st, err = s.stageAppend(ctx, ps, rdr, o, latest)
		if errors.Is(err, errNoVersion) {
			st, err = s.stageVersion(ctx, ps, rdr, o, false)
		}
	}
	if err != nil {
		return nil, err
	}
	res := s.commitStaged(ctx, ps, st)
	for res.carry != nil && attempt < maxRetarget {
		// A compaction: take in what was appended to its source meanwhile.
		if err := s.carryIn(ctx, ps, st, res.carry); err != nil {
			s.discard(ps, st)
			return nil, err
		}
		attempt++
		st.carryLocked = attempt >= 2
		res = s.commitStaged(ctx, ps, st)
	}
	switch {
	case res.rec != nil && res.err != nil:
		return nil, res.err // committed; the client is told to retry (and gets a replay)
	case res.carry != nil:
		s.discard(ps, st)
		return nil, fmt.Errorf("%w: %s: appends kept arriving while it was compacted; retry", ErrUnavailable, p)
	case res.err != nil:
		s.discard(ps, st)
		return nil, res.err
	case res.replayed != nil:
		s.discard(ps, st)
		r := *res.replayed
		r.Replayed = true
		return &r, nil
	case res.retarget:
		if attempt >= maxRetarget {
			s.discard(ps, st)
			return nil, fmt.Errorf("%w: %s changed %d times while the put was being committed; retry it", ErrUnavailable, p, attempt+1)
		}
		return s.retarget(ctx, ps, st, attempt)
	}
	return res.rec, nil
}

// errNoVersion: an append found nothing to append to and writes instead.
var errNoVersion = errors.New("no version to append to")

// checkIncomingSchema refuses schemas no version can hold.
func checkIncomingSchema(sc *arrow.Schema) error {
	return checkUniqueNames(sc)
}

// stageVersion streams a put into a new version directory.
func (s *Store) stageVersion(ctx context.Context, ps *profileState, rdr array.RecordReader, o PutOptions, create bool) (*staged, error) {
	p := ps.p
	f, err := parseFormat(o.Format)
	if err != nil {
		return nil, err
	}
	sc := rdr.Schema()
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
	if ok, err := s.exists(ctx, p); err != nil {
		return nil, err
	} else if !ok {
		if err := s.checkCreatable(ctx, p); err != nil {
			return nil, err
		}
	} else if err := s.checkFormatOf(ctx, ps, f); err != nil {
		return nil, err
	}
	version, err := s.reserveVersion(ctx, ps)
	if err != nil {
		return nil, err
	}
	st := &staged{p: p, mode: ModeWrite, create: create, version: version, format: f, by: o.PartitionBy, schemaV: o.SchemaVersion, o: o}
	md := sc.Metadata()
	st.schema = arrow.NewSchema(sc.Fields(), &md)
	vi := newVersionInfo(version, f, st.schema, o.PartitionBy, o.SchemaVersion, s.opts.now(), s.writerOf(o))
	b, _ := json.MarshalIndent(vi, "", "  ")
	if err := s.fs.CreateExclusive(ctx, path.Join(p.vdir(version), versionInfoName), b); err != nil {
		s.discard(ps, st)
		return nil, fmt.Errorf("write %s %s: %w", p, VersionName(version), err)
	}
	if err := s.stream(ctx, st, rdr, &conformPlan{same: true}); err != nil {
		s.discard(ps, st)
		return nil, err
	}
	return st, nil
}

// checkFormatOf refuses a write whose format differs from the profile's.
func (s *Store) checkFormatOf(ctx context.Context, ps *profileState, f Format) error {
	vs, err := s.readableVersion(ctx, ps.p, Latest)
	if err != nil {
		return nil //nolint:nilerr // an unreadable latest version is not this put's business
	}
	if (len(vs.Files) > 0 || vs.Write != nil) && vs.Format != f {
		return fmt.Errorf("%w: %s holds %s files; cannot write %s (one format per profile: use other keys)", ErrFormatMismatch, ps.p, vs.Format, f)
	}
	return nil
}

// reserveVersion claims the next vN directory with an atomic mkdir (as
// pyrosome's writers do).
func (s *Store) reserveVersion(ctx context.Context, ps *profileState) (int, error) {
	p := ps.p
	entries, err := s.fs.List(ctx, p.dir)
	if err != nil && !isNotExist(err) {
		return 0, fmt.Errorf("list %s: %w", p, err)
	}
	next := 0
	for _, e := range entries {
		if v, ok := parseVersionDir(e.Name); ok && e.Dir {
			next = max(next, v+1)
		}
	}
	ps.mu.Lock()
	for v := range ps.log.byVersion {
		next = max(next, v+1)
	}
	for v := range ps.log.retired {
		next = max(next, v+1)
	}
	ps.mu.Unlock()
	for ; ; next++ {
		err := s.fs.Mkdir(ctx, p.vdir(next))
		if err == nil {
			return next, nil
		}
		if !errors.Is(err, fsys.ErrExist) {
			return 0, fmt.Errorf("create %s %s: %w", p, VersionName(next), err)
		}
	}
}

// stageAppend streams an append into version latest.
func (s *Store) stageAppend(ctx context.Context, ps *profileState, rdr array.RecordReader, o PutOptions, latest int) (*staged, error) {
	p := ps.p
	if err := s.syncLog(ctx, ps); err != nil {
		return nil, err
	}
	vs, err := s.loadVersion(ctx, ps, latest, latest, loadRead)
	if err != nil {
		return nil, err
	}
	if vs.Retired != nil || (vs.Write == nil && vs.Legacy == 0 && len(vs.Files) == 0) {
		return nil, errNoVersion // pyrosome: appending to empty data writes instead
	}
	if o.Format != "" {
		f, _ := parseFormat(o.Format)
		if f != vs.Format {
			return nil, fmt.Errorf("%w: %s holds %s files; cannot append %s (one format per profile)", ErrFormatMismatch, p, vs.Format, f)
		}
	}
	if o.PartitionBy != nil && strings.Join(o.PartitionBy, ",") != strings.Join(vs.PartitionBy, ",") {
		return nil, fmt.Errorf("%w: %s %s is partitioned by %s; an append cannot change that (write a new version)", ErrInvalidArgument, p, VersionName(latest), quoteNames(vs.PartitionBy))
	}
	if o.SchemaVersion != "" && o.SchemaVersion != vs.SchemaVersion {
		return nil, fmt.Errorf("%w: %s %s has schema version %q, not %q; write a new version for a new schema version", ErrSchemaMismatch, p, VersionName(latest), vs.SchemaVersion, o.SchemaVersion)
	}
	what := fmt.Sprintf("%s %s", p, VersionName(latest))
	plan, err := planConform(rdr.Schema(), vs.Schema, vs.Format == FormatParquet, what)
	if err != nil {
		return nil, err
	}
	st := &staged{p: p, mode: ModeAppend, version: latest, format: vs.Format, schema: vs.Schema, by: vs.PartitionBy, schemaV: vs.SchemaVersion, o: o}
	if st.index, err = s.claimIndex(ctx, ps, latest, vs.Format); err != nil {
		return nil, err
	}
	st.claims = append(st.claims, st.index)
	if err := s.stream(ctx, st, rdr, plan); err != nil {
		s.discard(ps, st)
		return nil, err
	}
	return st, nil
}

func (s *Store) writerOf(o PutOptions) string {
	if o.Writer != "" {
		return o.Writer
	}
	return s.opts.writer
}

// claimIndex claims the next free index of a version by exclusively
// creating its .claim marker (never deleted). It starts where this process
// last claimed, so it costs one create however long the history; only a
// conflict (another process or pyrosome claimed meanwhile) probes further,
// and repeated conflicts list the directory once to jump ahead.
func (s *Store) claimIndex(ctx context.Context, ps *profileState, version int, f Format) (int, error) {
	p := ps.p
	vdir := p.vdir(version)
	ps.mu.Lock()
	next, known := ps.nextIndex[version]
	ps.mu.Unlock()
	if !known {
		var err error
		if next, err = s.scanNextIndex(ctx, ps, version); err != nil {
			return 0, err
		}
	}
	conflicts := 0
	for {
		err := s.fs.CreateExclusive(ctx, path.Join(vdir, claimName(next, f)), nil)
		if err == nil {
			ps.mu.Lock()
			ps.nextIndex[version] = max(ps.nextIndex[version], next+1)
			ps.mu.Unlock()
			return next, nil
		}
		if !errors.Is(err, fsys.ErrExist) {
			return 0, fmt.Errorf("claim index in %s %s: %w", p, VersionName(version), err)
		}
		conflicts++
		if conflicts == 4 {
			scanned, err := s.scanNextIndex(ctx, ps, version)
			if err != nil {
				return 0, err
			}
			next = max(next+1, scanned)
			continue
		}
		next++
	}
}

// scanNextIndex lists a version directory for the first index above every
// data file, claim and record in it.
func (s *Store) scanNextIndex(ctx context.Context, ps *profileState, version int) (int, error) {
	entries, err := s.fs.List(ctx, ps.p.vdir(version))
	if err != nil && !isNotExist(err) {
		return 0, fmt.Errorf("list %s %s: %w", ps.p, VersionName(version), err)
	}
	next := 0
	for _, e := range entries {
		if i, _, ok := parseDataFile(e.Name); ok {
			next = max(next, i+1)
		}
		for _, re := range []*regexpT{claimRe, legacyRecRe} {
			if i, ok := parseIndexed(re, e.Name); ok {
				next = max(next, i+1)
			}
		}
	}
	ps.mu.Lock()
	for _, r := range ps.log.byVersion[version] {
		for _, f := range r.Files {
			next = max(next, indexOfPath(f.Path, r.Index)+1)
		}
	}
	ps.mu.Unlock()
	return next, nil
}

// discard removes what a put that will not commit wrote: its files, and
// the version it reserved. Claims stay (pyrosome's rule: a claim without
// data is a gap).
func (s *Store) discard(ps *profileState, st *staged) {
	ctx := context.Background()
	if st.mode == ModeWrite {
		if err := s.fs.DeleteAll(ctx, ps.p.vdir(st.version)); err != nil {
			s.opts.log.Error().Err(err).Str("profile", ps.p.String()).Msg("could not remove the version of a failed put; sweep will")
		}
		return
	}
	for _, f := range st.files {
		if err := s.fs.Delete(ctx, ps.p.join(f.Path)); err != nil {
			s.opts.log.Error().Err(err).Str("profile", ps.p.String()).Msg("could not remove a file of a failed put; sweep will")
			return // its claims stay: the index must not be reused over a file
		}
	}
	// Its claims go too, now that no file of it holds their indices: a
	// refused put leaves the data directory as it found it. (A claim is
	// never deleted while a file of its index may exist.)
	for _, i := range st.claims {
		if err := s.fs.Delete(ctx, path.Join(ps.p.vdir(st.version), claimName(i, st.format))); err != nil {
			s.opts.log.Warn().Err(err).Str("profile", ps.p.String()).Msg("could not remove the claim of a failed put")
		}
	}
}

// retarget moves a staged put that lost its version (a write committed
// while it streamed, or another client created the profile first) into
// the latest version: its files are read back and appended there, conformed
// to that version's schema, and then removed.
func (s *Store) retarget(ctx context.Context, ps *profileState, st *staged, attempt int) (*CommitRecord, error) {
	defer s.discard(ps, st)
	sn := &Snapshot{Keys: st.p.keys, Version: st.version, Format: st.format, Schema: st.schema, PartitionBy: st.by, SchemaVersion: st.schemaV}
	for _, f := range st.files {
		sn.Files = append(sn.Files, DataFile{Path: f.Path, Index: indexOfPath(f.Path, st.index), Rows: f.Rows, Bytes: f.Bytes, SHA256: f.SHA256,
			Partition: f.Partition, Recorded: true})
	}
	rdr, err := s.OpenSnapshot(ctx, sn, nil)
	if err != nil {
		return nil, err
	}
	defer rdr.Release()
	o := st.o
	o.Mode = ModeAppend
	if st.mode == ModeWrite && !st.create {
		o.Mode = ModeWrite // cannot happen: writes never retarget
	}
	o.PartitionBy = nil
	if st.create {
		// It created nothing: the profile's first version is another's.
		o.SchemaVersion = ""
		if st.o.SchemaVersion != "" {
			o.SchemaVersion = st.o.SchemaVersion
		}
	}
	return s.put(ctx, ps, rdr, o, attempt+1)
}

// carryIn streams the files of late appends into a staged write, after
// its own files, and moves its carry point past them.
func (s *Store) carryIn(ctx context.Context, ps *profileState, st *staged, late []*CommitRecord) error {
	sn := &Snapshot{Keys: st.p.keys, Version: st.o.carry.version, Format: st.format, Schema: st.schema, PartitionBy: st.by, SchemaVersion: st.schemaV}
	for _, r := range late {
		for _, f := range r.Files {
			sn.Files = append(sn.Files, DataFile{Path: f.Path, Index: indexOfPath(f.Path, r.Index), Rows: f.Rows, Bytes: f.Bytes,
				SHA256: f.SHA256, Partition: f.Partition, Recorded: true})
		}
		if r.Seq > st.o.carry.seq {
			c := *st.o.carry
			c.seq = r.Seq
			st.o.carry = &c
		}
	}
	rdr, err := s.OpenSnapshot(ctx, sn, nil)
	if err != nil {
		return err
	}
	defer rdr.Release()
	plan, err := planConform(sn.Schema, st.schema, st.format == FormatParquet, ps.p.String())
	if err != nil {
		return err
	}
	return s.stream(ctx, st, rdr, plan)
}

// sink is one output file of a put.
type sink struct {
	part   partKey
	seq    int // n-th file of its directory in this put
	name   string
	w      fsys.Writer
	h      hash.Hash
	n      int64 // bytes written
	rows   int64
	pw     *pqarrow.FileWriter
	cw     *csv.Writer
	closed bool
	ioErr  error // the first error of the file itself (disk full, …)
	mem    int64 // bytes charged to the memory budget
}

func (k *sink) Write(b []byte) (int, error) {
	n, err := k.w.Write(b)
	k.h.Write(b[:n])
	k.n += int64(n)
	if err != nil && k.ioErr == nil {
		k.ioErr = err
	}
	return n, err
}

// buffered estimates what the sink holds in memory: the row group being
// built (Parquet buffers a whole row group before writing it).
func (k *sink) buffered() int64 {
	if k.pw == nil || k.closed {
		return 0
	}
	return k.pw.RowGroupTotalCompressedBytes() + k.pw.RowGroupTotalBytesWritten()
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

// stream writes rdr through plan into one file per partition directory
// (more with TargetFileBytes), and commits each file to storage (visible
// under its final name, not yet to Quiver's readers: no record lists it).
func (s *Store) stream(ctx context.Context, st *staged, rdr array.RecordReader, plan *conformPlan) (err error) {
	p := st.p
	vdir := p.vdir(st.version)
	fileSchema := st.schema
	var partIdx []int
	if len(st.by) > 0 {
		keep := make([]arrow.Field, 0, st.schema.NumFields())
		for i, f := range st.schema.Fields() {
			if !slices.Contains(st.by, f.Name) {
				keep = append(keep, st.schema.Field(i))
			}
		}
		for _, c := range st.by {
			partIdx = append(partIdx, st.schema.FieldIndices(c)[0])
		}
		md := st.schema.Metadata()
		fileSchema = arrow.NewSchema(keep, &md)
	}
	var props *parquet.WriterProperties
	if st.format == FormatParquet {
		props = s.parquetProps(fileSchema, len(partIdx) > 0)
	}
	sinks := map[string]*sink{} // the open file of each directory
	if st.dirSeqs == nil {
		st.dirSeqs = map[string]int{}
	}
	seqs := st.dirSeqs
	var order []*sink
	done := len(st.files) // files of earlier stream calls stay on failure
	var total, charged int64
	defer func() {
		s.budget.release(charged)
		if err != nil {
			for _, k := range order {
				if !k.closed && k.pw != nil {
					_ = k.pw.Close()
				}
				if k.w != nil {
					_ = k.w.Abort()
				}
			}
			for _, f := range st.files[done:] {
				_ = s.fs.Delete(context.WithoutCancel(ctx), p.join(f.Path))
			}
			st.files = st.files[:done]
		}
	}()
	// charge tells the budget what the sinks buffer now; over budget, the
	// put flushes its fullest files first.
	charge := func() error {
		var now int64
		for _, k := range sinks {
			k.mem = k.buffered()
			now += k.mem
		}
		charged += s.budget.adjust(now - charged)
		if !s.budget.over() {
			return nil
		}
		open := make([]*sink, 0, len(sinks))
		for _, k := range sinks {
			open = append(open, k)
		}
		sort.Slice(open, func(i, j int) bool { return open[i].mem > open[j].mem })
		for _, k := range open {
			if k.mem == 0 || !s.budget.over() {
				break
			}
			if err := k.pw.NewBufferedRowGroupChecked(); err != nil {
				return k.encodeErr(p, st.format, err)
			}
			after := k.buffered()
			charged += s.budget.adjust(after - k.mem)
			k.mem = after
		}
		return nil
	}
	open := func(dir string) (*sink, error) {
		if k, ok := sinks[dir]; ok {
			return k, nil
		}
		if len(sinks) >= s.opts.partitionLimit {
			return nil, fmt.Errorf("%w: a put may touch at most %d partitions", ErrInvalidArgument, s.opts.partitionLimit)
		}
		k := &sink{h: sha256.New(), seq: seqs[dir]}
		seqs[dir]++
		idx := st.index + k.seq
		if k.seq > 0 && st.mode == ModeAppend {
			// Another file of this append in the same directory needs an
			// index of its own.
			var err error
			if idx, err = s.claimIndex(ctx, s.state(p), st.version, st.format); err != nil {
				return nil, err
			}
			st.claims = append(st.claims, idx)
		}
		if dir != "" {
			vals, err := parsePartitionDir(dir)
			if err != nil {
				return nil, err
			}
			k.part = partKey{dir: dir, values: vals}
		}
		k.name = path.Join(vdir, dir, dataFileName(idx, st.format))
		w, err := s.fs.Create(ctx, k.name)
		if err != nil {
			return nil, fmt.Errorf("write %s: %w", p, err)
		}
		k.w = w
		if st.format == FormatCSV {
			k.cw = csv.NewWriter(k, fileSchema, csv.WithHeader(true), csv.WithNullWriter(""), csv.WithCustomTypeConverter(csvFloats))
		} else {
			k.pw, err = pqarrow.NewFileWriter(fileSchema, k, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema(), pqarrow.WithAllocator(s.opts.mem)))
			if err != nil {
				_ = w.Abort()
				return nil, fmt.Errorf("%w: %s cannot be stored as Parquet: %v", ErrInvalidArgument, p, err)
			}
			kv := [][2]string{{SchemaVersionKey, st.schemaV}}
			if st.o.RequestID != "" {
				kv = append(kv, [2]string{requestIDKey, st.o.RequestID}, [2]string{writerKey, s.writerOf(st.o)})
			}
			for _, e := range kv {
				if err := k.pw.AppendKeyValueMetadata(e[0], e[1]); err != nil {
					_ = w.Abort()
					return nil, err
				}
			}
		}
		sinks[dir] = k
		order = append(order, k)
		return k, nil
	}
	finish := func(k *sink) error {
		k.closed = true
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
				return err
			}
		}
		if k.pw != nil {
			if err := k.pw.Close(); err != nil {
				return k.encodeErr(p, st.format, err)
			}
		}
		if err := k.w.Commit(ctx); err != nil {
			return fmt.Errorf("write %s: %w", p, err)
		}
		rel := strings.TrimPrefix(k.name, p.dir+"/")
		st.files = append(st.files, FileRecord{Path: rel, Rows: k.rows, Bytes: k.n, SHA256: hex.EncodeToString(k.h.Sum(nil)), Partition: k.part.values})
		st.rows += k.rows
		return nil
	}
	writeTo := func(k *sink, rec arrow.RecordBatch) error {
		before := k.n
		k.rows += rec.NumRows()
		if k.cw != nil {
			if err := k.cw.Write(rec); err != nil {
				return k.encodeErr(p, st.format, err)
			}
			if err := k.cw.Flush(); err != nil {
				return k.encodeErr(p, st.format, err)
			}
		} else {
			if err := k.pw.WriteBuffered(rec); err != nil {
				return k.encodeErr(p, st.format, err)
			}
			if k.pw.RowGroupTotalBytesWritten()+k.pw.RowGroupTotalCompressedBytes() >= s.opts.rowGroupBytes/int64(max(1, len(sinks))) {
				if err := k.pw.NewBufferedRowGroupChecked(); err != nil {
					return k.encodeErr(p, st.format, err)
				}
			}
		}
		total += k.n - before
		if s.opts.maxPutBytes > 0 && total > s.opts.maxPutBytes {
			return fmt.Errorf("%w: %s: more than %d bytes in one put", ErrTooLarge, p, s.opts.maxPutBytes)
		}
		if st.o.TargetFileBytes > 0 && st.mode == ModeWrite && k.pw != nil && k.n+k.pw.RowGroupTotalBytesWritten() >= st.o.TargetFileBytes {
			// Roll over: the next rows of this directory start a new file.
			delete(sinks, k.part.dir)
			if err := finish(k); err != nil {
				return err
			}
		}
		return nil
	}
	if len(partIdx) == 0 {
		if _, err := open(""); err != nil {
			return err
		}
	}
	var inBytes int64
	for rdr.Next() {
		if err := ctx.Err(); err != nil {
			return err
		}
		in := rdr.RecordBatch()
		// The limit counts what the client sent (Arrow bytes), checked
		// before anything of the batch is written.
		inBytes += util.TotalRecordSize(in)
		if s.opts.maxPutBytes > 0 && inBytes > s.opts.maxPutBytes {
			return fmt.Errorf("%w: %s: more than %d bytes in one put", ErrTooLarge, p, s.opts.maxPutBytes)
		}
		if err := validateBatch(in); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrInvalidArgument, p, err)
		}
		rec, err := plan.apply(ctx, in)
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrSchemaMismatch, p, err)
		}
		if err := checkNulls(rec); err != nil {
			rec.Release()
			return fmt.Errorf("%w: %s: %v", ErrInvalidArgument, p, err)
		}
		if len(partIdx) == 0 {
			fb := toFileBatch(rec, fileSchema)
			k, werr := open("")
			if werr == nil {
				werr = writeTo(k, fb)
			}
			fb.Release()
			rec.Release()
			if werr != nil {
				return wrapWrite(p, werr)
			}
		} else {
			dirs, parts, err := splitByPartition(ctx, rec, partIdx, st.by)
			rec.Release()
			if err != nil {
				return err
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
				return wrapWrite(p, werr)
			}
		}
		if st.format == FormatParquet {
			if err := charge(); err != nil {
				return wrapWrite(p, err)
			}
		}
	}
	if err := rdr.Err(); err != nil {
		return fmt.Errorf("%w: put to %s: %w", ErrBadStream, p, err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// Files in a stable order: root first, then partitions by path, each
	// directory's files in the order written.
	sort.SliceStable(order, func(i, j int) bool {
		if order[i].part.dir != order[j].part.dir {
			return order[i].part.dir < order[j].part.dir
		}
		return order[i].seq < order[j].seq
	})
	for _, k := range order {
		if k.closed {
			continue
		}
		if err := finish(k); err != nil {
			return wrapWrite(p, err)
		}
	}
	sort.SliceStable(st.files, func(i, j int) bool {
		di, dj := path.Dir(st.files[i].Path), path.Dir(st.files[j].Path)
		if di != dj {
			return di < dj
		}
		return indexOfPath(st.files[i].Path, 0) < indexOfPath(st.files[j].Path, 0)
	})
	if st.mode == ModeWrite {
		// A write split into several files per directory takes the next
		// indices too (claimed, for pyrosome's appenders).
		for _, f := range st.files {
			if i := indexOfPath(f.Path, 0); i > 0 {
				if err := s.fs.CreateExclusive(ctx, path.Join(vdir, claimName(i, st.format)), nil); err != nil && !errors.Is(err, fsys.ErrExist) {
					return fmt.Errorf("claim index in %s %s: %w", p, VersionName(st.version), err)
				}
			}
		}
	}
	return nil
}

func wrapWrite(p profile, err error) error {
	if errors.Is(err, ErrTooLarge) || errors.Is(err, ErrInvalidArgument) || errors.Is(err, ErrSchemaMismatch) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("write %s: %w", p, err)
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
