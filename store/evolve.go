package store

// Additive schema evolution (docs/format.md, "Schema evolution"): an append
// may add nullable columns to a version when it raises the schema version.
// Files are never rewritten: each keeps the schema it was written with, and
// the version's schema is the union of its files' schemas. The commit
// record of an append whose files' schema is not the version's at its
// commit carries that schema ("schema"), so a reader knows every file's
// columns from the log alone, without opening a footer.

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/quiverdb/quiver/store/codec"
)

// semVer is a parsed semantic version (semver.org 2.0.0): build metadata is
// ignored in comparisons.
type semVer struct {
	nums [3]uint64
	pre  []string
}

// parseSemVer parses MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD].
func parseSemVer(s string) (semVer, bool) {
	var v semVer
	core, build, hasBuild := strings.Cut(s, "+")
	if hasBuild && !validIdents(build, false) {
		return v, false
	}
	core, pre, hasPre := strings.Cut(core, "-")
	parts := strings.Split(core, ".")
	if len(parts) != 3 {
		return v, false
	}
	for i, p := range parts {
		if p == "" || (len(p) > 1 && p[0] == '0') || strings.TrimLeft(p, "0123456789") != "" {
			return v, false
		}
		n, err := strconv.ParseUint(p, 10, 64)
		if err != nil {
			return v, false
		}
		v.nums[i] = n
	}
	if hasPre {
		if !validIdents(pre, true) {
			return v, false
		}
		v.pre = strings.Split(pre, ".")
	}
	return v, true
}

// validIdents checks dot-separated identifiers of [0-9A-Za-z-]; numeric
// ones of a pre-release must not have leading zeros.
func validIdents(s string, pre bool) bool {
	for id := range strings.SplitSeq(s, ".") {
		if id == "" {
			return false
		}
		for _, c := range id {
			if (c < '0' || c > '9') && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && c != '-' {
				return false
			}
		}
		if pre && isNumeric(id) && len(id) > 1 && id[0] == '0' {
			return false
		}
	}
	return true
}

func isNumeric(s string) bool { return s != "" && strings.TrimLeft(s, "0123456789") == "" }

// compareSemVer orders a and b by semantic-version precedence.
func compareSemVer(a, b semVer) int {
	for i := range a.nums {
		if a.nums[i] != b.nums[i] {
			if a.nums[i] < b.nums[i] {
				return -1
			}
			return 1
		}
	}
	switch {
	case len(a.pre) == 0 && len(b.pre) == 0:
		return 0
	case len(a.pre) == 0:
		return 1
	case len(b.pre) == 0:
		return -1
	}
	for i := 0; i < len(a.pre) && i < len(b.pre); i++ {
		x, y := a.pre[i], b.pre[i]
		if x == y {
			continue
		}
		xn, yn := isNumeric(x), isNumeric(y)
		switch {
		case xn && yn:
			if len(x) != len(y) {
				return cmpInt(len(x), len(y))
			}
			return strings.Compare(x, y)
		case xn:
			return -1
		case yn:
			return 1
		}
		return strings.Compare(x, y)
	}
	return cmpInt(len(a.pre), len(b.pre))
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// higherSchemaVersion returns the higher of two schema versions; a version
// that does not parse as semver never replaces one that does, and "" is
// the lowest.
func higherSchemaVersion(a, b string) string {
	if a == "" {
		return b
	}
	if b == "" {
		return a
	}
	va, oka := parseSemVer(a)
	vb, okb := parseSemVer(b)
	if oka && okb && compareSemVer(vb, va) > 0 {
		return b
	}
	if !oka && okb {
		return b
	}
	return a
}

// suggestNext proposes the next minor version after cur (for messages).
func suggestNext(cur string) string {
	v, ok := parseSemVer(cur)
	if !ok {
		return "1.0.0"
	}
	return fmt.Sprintf("%d.%d.0", v.nums[0], v.nums[1]+1)
}

// columnsEqual reports whether a and b have the same columns (names, types,
// nullability) in the same order; metadata is not compared.
func columnsEqual(a, b *arrow.Schema) bool {
	if a.NumFields() != b.NumFields() {
		return false
	}
	for i := range a.NumFields() {
		fa, fb := a.Field(i), b.Field(i)
		if fa.Name != fb.Name || fa.Nullable != fb.Nullable || !arrow.TypeEqual(fa.Type, fb.Type) {
			return false
		}
	}
	return true
}

// columnsWithin reports whether every column of sub is a column of sup of
// the same type.
func columnsWithin(sub, sup *arrow.Schema) bool {
	for _, f := range sub.Fields() {
		idx := sup.FieldIndices(f.Name)
		if len(idx) != 1 || !arrow.TypeEqual(sup.Field(idx[0]).Type, f.Type) {
			return false
		}
	}
	return true
}

// unionSchema is u followed by the columns of f that u lacks (first-seen
// order). Field- and schema-level metadata come from f, the newer, where
// f carries them and holds every column of u (a file written under an
// older schema never takes back metadata).
func unionSchema(u, f *arrow.Schema) *arrow.Schema {
	newer := true
	for _, fl := range u.Fields() {
		if len(f.FieldIndices(fl.Name)) == 0 {
			newer = false
			break
		}
	}
	fields := make([]arrow.Field, 0, max(u.NumFields(), f.NumFields()))
	for _, fl := range u.Fields() {
		if idx := f.FieldIndices(fl.Name); newer && len(idx) == 1 && f.Field(idx[0]).HasMetadata() {
			fl.Metadata = f.Field(idx[0]).Metadata
		}
		fields = append(fields, fl)
	}
	for _, fl := range f.Fields() {
		if len(u.FieldIndices(fl.Name)) == 0 {
			fields = append(fields, fl)
		}
	}
	md := u.Metadata()
	if fm := f.Metadata(); newer && fm.Len() > 0 {
		md = fm
	}
	return arrow.NewSchema(fields, &md)
}

// absentColumns names the columns of the version's schema full that a file
// written with schema file lacks (partition columns, which live in the
// directory names, are never absent).
func absentColumns(full, file *arrow.Schema, partitionBy []string) []string {
	var out []string
	for _, f := range full.Fields() {
		if len(file.FieldIndices(f.Name)) == 0 && !slices.Contains(partitionBy, f.Name) {
			out = append(out, f.Name)
		}
	}
	return out
}

// encodeRecordSchema is a record's "schema": the base64 IPC schema
// message, as .version.json holds it.
func encodeRecordSchema(sc *arrow.Schema) string {
	return base64.StdEncoding.EncodeToString(encodeSchema(sc))
}

// decodeRecordSchema parses a record's "schema".
func decodeRecordSchema(s string) (*arrow.Schema, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, err
	}
	return decodeSchema(b)
}

// appendPlan is how an append's batches become its files: conformed to
// schema (the files' full schema, partition columns included) and stamped
// with schemaV.
type appendPlan struct {
	conf    *codec.Conformer
	schema  *arrow.Schema
	schemaV string
	// evolves: the append adds columns to the version (its record carries
	// its schema, and it commits only onto the schema it was planned on).
	evolves bool
}

// typeUntyped is cur (a CSV version's inferred schema) with the columns
// named in untyped (no value in any file yet) taking their type from in,
// the append's schema. Cast to the string type inference gives such a
// column, a float 0.0 was written "0", which made the column int64 for
// every later read and append, so that the next append of -1.5 was refused
// (TestFilterMatchesNaive, TestCSVUntypedColumnTakesAppendType): written
// as its own type, the value decides the column's type as it would have
// in the first file.
func typeUntyped(cur, in *arrow.Schema, untyped []string) *arrow.Schema {
	fields := slices.Clone(cur.Fields())
	for i, f := range fields {
		if slices.Contains(untyped, f.Name) {
			fields[i].Type = in.Field(in.FieldIndices(f.Name)[0]).Type
		}
	}
	md := cur.Metadata()
	return arrow.NewSchema(fields, &md)
}

// planAppend decides how an append with schema in fits version vs, whose
// Schema and SchemaVersion are its current (evolved) ones: the same
// columns (reordered, losslessly widened), or those columns and new
// nullable ones under a higher schema version. Anything else is
// ErrSchemaMismatch (InvalidArgument) saying what the rule is and what to
// do instead.
func planAppend(in *arrow.Schema, vs *VersionState, o PutOptions, what string) (*appendPlan, error) {
	if err := codec.CheckUniqueNames(in); err != nil {
		return nil, err
	}
	cur := vs.Schema
	var missing, extra []string
	for _, f := range cur.Fields() {
		if len(in.FieldIndices(f.Name)) == 0 {
			missing = append(missing, f.Name)
		}
	}
	for _, f := range in.Fields() {
		if len(cur.FieldIndices(f.Name)) == 0 {
			extra = append(extra, f.Name)
		}
	}
	parquet := vs.Format == FormatParquet
	switch {
	case len(missing) > 0 && len(extra) > 0:
		return nil, fmt.Errorf("%w: columns %s do not match existing columns %s of %s (missing %s, unexpected %s): a version's columns are never dropped or renamed (older and newer files are read as one table); "+
			"send %s as well (nulls where you have no values), adding new columns as nullable under a higher schema_version, or write a new version to change the schema",
			ErrSchemaMismatch, codec.QuoteNames(codec.FieldNames(in)), codec.QuoteNames(codec.FieldNames(cur)), what, codec.QuoteNames(missing), codec.QuoteNames(extra), codec.QuoteNames(missing))
	case len(missing) > 0:
		return nil, fmt.Errorf("%w: columns %s do not match existing columns %s of %s (missing %s): a version's columns are never dropped; send them, with nulls where you have no values, or write a new version to change the schema",
			ErrSchemaMismatch, codec.QuoteNames(codec.FieldNames(in)), codec.QuoteNames(codec.FieldNames(cur)), what, codec.QuoteNames(missing))
	case len(extra) == 0:
		if o.SchemaVersion != "" && o.SchemaVersion != vs.SchemaVersion {
			if nv, ok := parseSemVer(o.SchemaVersion); ok {
				if cv, ok := parseSemVer(vs.SchemaVersion); (ok && compareSemVer(nv, cv) > 0) || vs.SchemaVersion == "" {
					return nil, fmt.Errorf("%w: %s: schema_version %q is above the version's %q, but the append adds no column: an append raises the schema version only to add nullable columns; send the new columns, or send schema_version %q (or none), or write a new version for a new schema version",
						ErrSchemaMismatch, what, o.SchemaVersion, vs.SchemaVersion, vs.SchemaVersion)
				}
			}
			return nil, fmt.Errorf("%w: %s has schema version %q, not %q: an append without new columns is stamped with the version's current schema version; send %q or none (write a new version for a new schema version)",
				ErrSchemaMismatch, what, vs.SchemaVersion, o.SchemaVersion, vs.SchemaVersion)
		}
		target := cur
		if !parquet && len(vs.CSVUntyped) > 0 {
			target = typeUntyped(cur, in, vs.CSVUntyped)
		}
		conf, err := codec.PlanConform(in, target, parquet, what)
		if err != nil {
			return nil, err
		}
		return &appendPlan{conf: conf, schema: target, schemaV: vs.SchemaVersion}, nil
	}
	// New columns: additive evolution.
	switch {
	case !parquet:
		return nil, fmt.Errorf("%w: %s: the append adds columns %s, but CSV files carry no schema or schema version: only Parquet profiles evolve; write a new version to change the schema",
			ErrSchemaMismatch, what, codec.QuoteNames(extra))
	case vs.Info == nil:
		return nil, fmt.Errorf("%w: %s: the append adds columns %s, but the version was not written by Quiver (no .version.json to evolve from); write a new version to change the schema",
			ErrSchemaMismatch, what, codec.QuoteNames(extra))
	}
	for _, name := range extra {
		for _, f := range cur.Fields() {
			if strings.EqualFold(f.Name, name) {
				return nil, fmt.Errorf("%w: %s: new column %q differs from the existing column %q only in case (case-insensitive readers such as DuckDB would see one column twice); send it as %q",
					ErrSchemaMismatch, what, name, f.Name, f.Name)
			}
		}
		if f := in.Field(in.FieldIndices(name)[0]); !f.Nullable {
			return nil, fmt.Errorf("%w: %s: new column %q is declared non-nullable, but the rows already in the version have no value for it: schema evolution adds nullable columns only; declare it nullable",
				ErrSchemaMismatch, what, name)
		}
	}
	next := suggestNext(vs.SchemaVersion)
	if o.SchemaVersion == "" {
		return nil, fmt.Errorf("%w: %s: the append adds columns %s: a new column needs a schema_version above the version's %q (semantic versioning, e.g. %q); send one, or leave the new columns out",
			ErrSchemaMismatch, what, codec.QuoteNames(extra), vs.SchemaVersion, next)
	}
	nv, ok := parseSemVer(o.SchemaVersion)
	if !ok {
		return nil, fmt.Errorf("%w: %s: schema_version %q is not a semantic version (MAJOR.MINOR.PATCH, e.g. %q): an append that adds columns must raise the schema version in semantic-version order",
			ErrSchemaMismatch, what, o.SchemaVersion, next)
	}
	if vs.SchemaVersion != "" {
		cv, ok := parseSemVer(vs.SchemaVersion)
		if !ok {
			return nil, fmt.Errorf("%w: %s has schema version %q, which is not a semantic version: it cannot evolve by appends; write a new version (with a semantic schema_version) to change the schema",
				ErrSchemaMismatch, what, vs.SchemaVersion)
		}
		if compareSemVer(nv, cv) <= 0 {
			return nil, fmt.Errorf("%w: %s: the append adds columns %s under schema_version %q, which is not above the version's current %q: an append that adds columns must raise the schema version (e.g. to %q)",
				ErrSchemaMismatch, what, codec.QuoteNames(extra), o.SchemaVersion, vs.SchemaVersion, next)
		}
	}
	// The files' schema: the version's columns in its order (metadata
	// from the append where it carries some), then the new ones in the
	// append's order.
	fields := make([]arrow.Field, 0, in.NumFields())
	for _, f := range cur.Fields() {
		if g := in.Field(in.FieldIndices(f.Name)[0]); g.HasMetadata() {
			f.Metadata = g.Metadata
		}
		fields = append(fields, f)
	}
	for _, name := range extra {
		fields = append(fields, in.Field(in.FieldIndices(name)[0]))
	}
	md := cur.Metadata()
	if im := in.Metadata(); im.Len() > 0 {
		md = im
	}
	schema := arrow.NewSchema(fields, &md)
	// The version's schema grows by this append: it must stay one a put
	// may send, or the version could not be compacted (red team round
	// 22's w02: appends each adding 350 KiB of field metadata to another
	// column made 1.4 MB, over the limit a compaction then refused).
	if err := codec.ValidateSchema(schema); err != nil {
		return nil, fmt.Errorf("%s: the version's schema with this append's columns and metadata: %w", what, err)
	}
	conf, err := codec.PlanConform(in, schema, true, what)
	if err != nil {
		return nil, fmt.Errorf("%w (schema evolution only adds nullable columns: existing columns keep their types)", err)
	}
	return &appendPlan{conf: conf, schema: schema, schemaV: o.SchemaVersion, evolves: true}, nil
}

// evolvedSchema is version v's current schema and schema version: its
// .version.json's, unioned with the schemas its commit records carry (and
// those of recs, records of the running commit cycle). Records without a
// schema hold the schema current at their commit, which adds nothing.
func (s *Store) evolvedSchema(ps *profileState, v int, base *arrow.Schema, baseV string, recs []*CommitRecord) (*arrow.Schema, string) {
	ps.mu.Lock()
	evs := append([]*CommitRecord(nil), ps.log.evolving[v]...)
	ps.mu.Unlock()
	for _, r := range recs {
		if r.sc != nil && r.version() == v {
			evs = append(evs, r)
		}
	}
	u, sv := base, baseV
	for _, r := range evs {
		u = unionSchema(u, r.sc)
		sv = higherSchemaVersion(sv, r.SchemaVersion)
	}
	return u, sv
}

// currentOf is the current schema and schema version of version v of a
// Quiver-written Parquet version (its head is cached: it was read when the
// put was staged).
func (s *Store) currentOf(ctx context.Context, ps *profileState, v int, recs []*CommitRecord) (*arrow.Schema, string, bool, error) {
	h, err := s.head(ctx, ps, v)
	if err != nil || h == nil || h.info.Format != FormatParquet {
		return nil, "", false, err
	}
	u, sv := s.evolvedSchema(ps, v, h.schema, h.info.SchemaVersion, recs)
	return u, sv, true, nil
}

// schemaMoved reports, at commit, whether an append that adds columns was
// planned on a schema that is no longer its version's: another append
// changed it meanwhile, and the append must be planned again (re-targeted)
// against the new one — which may refuse it, as it would have had it
// started after that append.
func (s *Store) schemaMoved(ctx context.Context, ps *profileState, st *staged, recs []*CommitRecord) (bool, error) {
	if st.mode != ModeAppend || !st.evolves {
		return false, nil
	}
	u, sv, ok, err := s.currentOf(ctx, ps, st.version, recs)
	if err != nil || !ok {
		return false, err
	}
	return !columnsEqual(u, st.base) || sv != st.baseV, nil
}

// recordSchema is the "schema" of an append's record: the files' schema
// when it is not the version's current one (an append that adds columns,
// or one planned before another added some), else empty.
func (s *Store) recordSchema(ctx context.Context, ps *profileState, st *staged, recs []*CommitRecord) (string, *arrow.Schema, error) {
	if st.mode != ModeAppend || st.format != FormatParquet {
		return "", nil, nil
	}
	u, _, ok, err := s.currentOf(ctx, ps, st.version, recs)
	if err != nil || !ok {
		return "", nil, err
	}
	if !st.evolves && columnsEqual(st.schema, u) {
		return "", nil, nil
	}
	if !st.evolves && !columnsWithin(st.schema, u) {
		return "", nil, fmt.Errorf("%w: %s %s: the append's columns no longer fit the version's schema; retry it", ErrUnavailable, ps.p, VersionName(st.version))
	}
	enc := encodeRecordSchema(st.schema)
	if len(enc) > maxStoredSchema {
		return "", nil, schemaTooLarge(ps.p, len(enc))
	}
	return enc, st.schema, nil
}

// maxStoredSchema bounds a schema as the store keeps it (base64, in a
// commit record or a .version.json): those are metadata files, read
// whole and refused over fsys.MaxReadFile, so a schema near that size
// was acknowledged and then made the profile unreadable after a restart
// (red team round 21's v01: 48 added columns with names of 1 MiB). A
// segment may hold several records.
const maxStoredSchema = 8 << 20

// schemaTooLarge is the refusal of a put whose schema, as stored, is n
// bytes.
func schemaTooLarge(p profile, n int) error {
	return fmt.Errorf("%w: %s: the schema is %d bytes as stored (base64), more than %d: column names and metadata that long cannot be kept in a commit record; nothing was committed", ErrInvalidArgument, p, n, maxStoredSchema)
}

// applyEvolution gives a loaded Quiver Parquet version its evolved schema
// (the union of its files'), its highest schema version, and marks each
// recorded file with the columns it lacks. A version none of whose records
// carries a schema is left as loaded.
func applyEvolution(vs *VersionState) {
	if vs.Info == nil || vs.Format != FormatParquet || vs.Schema == nil {
		return
	}
	evolved := false
	for _, r := range vs.Records {
		if r.sc != nil {
			evolved = true
			break
		}
	}
	if !evolved {
		return
	}
	u, sv := vs.Schema, vs.SchemaVersion
	fileSc := make(map[*CommitRecord]*arrow.Schema, len(vs.Records))
	for _, r := range vs.Records {
		f := r.sc
		if f == nil {
			f = u
		} else {
			sv = higherSchemaVersion(sv, r.SchemaVersion)
		}
		fileSc[r] = f
		u = unionSchema(u, f)
	}
	vs.Schema, vs.SchemaVersion = u, sv
	absent := map[string][]string{}
	for _, r := range vs.Records {
		if f := fileSc[r]; f.NumFields() != u.NumFields() {
			lacks := absentColumns(u, f, vs.PartitionBy)
			for _, fr := range r.Files {
				absent[fr.Path] = lacks
			}
		}
	}
	if len(absent) == 0 {
		return
	}
	files := make([]DataFile, len(vs.Files))
	copy(files, vs.Files)
	for i := range files {
		if a, ok := absent[files[i].Path]; ok && files[i].Recorded {
			files[i].absent = a
		}
	}
	vs.Files = files
}

// SchemaVersionCount is how many files and rows of a version were written
// under one schema version.
type SchemaVersionCount struct {
	SchemaVersion string `json:"schema_version"`
	Files         int    `json:"files"`
	Rows          int64  `json:"rows"`
}

// schemaVersionCounts counts a version's committed files and rows by the
// schema version their records stamp, in the order first seen; files
// without a record (pyrosome's) count under "" with unknown rows as 0.
func (vs *VersionState) schemaVersionCounts() []SchemaVersionCount {
	var out []SchemaVersionCount
	at := map[string]int{}
	add := func(sv string, files int, rows int64) {
		i, ok := at[sv]
		if !ok {
			i = len(out)
			at[sv] = i
			out = append(out, SchemaVersionCount{SchemaVersion: sv})
		}
		out[i].Files += files
		out[i].Rows += max(rows, 0)
	}
	shared := map[string]bool{} // files appends share count once
	for _, r := range vs.Records {
		if len(r.Files) > 0 || r.Mode == ModeWrite {
			files := 0
			for _, f := range r.Files {
				if !f.Shared() || !shared[f.Path] {
					files++
					shared[f.Path] = f.Shared()
				}
			}
			add(r.SchemaVersion, files, r.Rows)
		}
	}
	for _, f := range vs.Files {
		if !f.Recorded {
			add("", 1, f.Rows)
		}
	}
	return out
}

// srcNull marks an output column a file lacks (openFile.src): it reads as
// nulls, and none of the file's data is read for it.
const srcNull = -2

// nullsForLacking turns the nullable output columns that a file without a
// record (pyrosome appended it to an evolved version) lacks into null
// columns, and returns the file columns still to read. Columns it lacks
// that are not nullable are left for the decoder to refuse.
func (r *SnapshotReader) nullsForLacking(of *openFile, fileSc *arrow.Schema, fileCols []string) []string {
	kept := fileCols[:0:0]
	for i, f := range r.wide.Fields() {
		if of.src[i] < 0 {
			continue
		}
		if f.Nullable && len(fileSc.FieldIndices(f.Name)) == 0 {
			of.src[i] = srcNull
			continue
		}
		of.src[i] = len(kept)
		kept = append(kept, f.Name)
	}
	return kept
}

// nullColumn returns n nulls of a column the file lacks, slicing one
// cached array.
func (r *SnapshotReader) nullColumn(of *openFile, i int, f arrow.Field, n int64) (arrow.Array, error) {
	if of.consts == nil {
		of.consts = make([]arrow.Array, r.wide.NumFields())
	}
	if c := of.consts[i]; c == nil || int64(c.Len()) < n {
		if c != nil {
			c.Release()
		}
		size := max(n, min(r.s.opts.readBatchRows, max(of.df.Rows, n)))
		of.consts[i] = array.MakeArrayOfNull(r.s.readMem, f.Type, int(size))
	}
	return array.NewSlice(of.consts[i], 0, n), nil
}
