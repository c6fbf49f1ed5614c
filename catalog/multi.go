package catalog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiverdb/quiver/store"
	"github.com/quiverdb/quiver/store/codec"
)

// Reads of several profiles as one (issue 16, item 3). A ticket or
// descriptor names them by a key "prefix" (every profile under it, in
// lexical order) or a list of "paths"; their schemas must unify under the
// rules of append widening (the same columns, in any order; types equal or
// one a lossless widening of the other, the wider kept; nullable if any
// is). "source_column" adds a string column naming each row's profile.
// GetFlightInfo plans one snapshot per profile and endpoints per profile;
// each endpoint ticket lists every profile with its planned version
// ("paths", "versions"), so that the unified schema is the plan's, and
// names the one it streams ("read") with its files.

// MaxProfiles bounds the profiles of one multi-profile read. Every
// endpoint's ticket pins every profile's version, so a plan grows with the
// square of the count (800 profiles: a 48 MB FlightInfo): 256 keeps it
// to a few MB and each ticket well under the request size limit.
const MaxProfiles = 256

// MultiRead is a read of several profiles.
type MultiRead struct {
	// Prefix, when not nil, names the profiles by key prefix; Resolve
	// replaces it with Profiles. An empty prefix is every profile.
	Prefix []string
	// Profiles are the profiles' keys, in the order they stream.
	Profiles [][]string
	// Versions pins each profile's version (Latest for the latest); nil is
	// the latest of each.
	Versions []int
	// Read is the index of the one profile an endpoint ticket streams, or
	// -1 for all of them.
	Read int
	// SourceColumn names a string column holding each row's profile path
	// (empty: none).
	SourceColumn string
}

// multiWire is the JSON of the multi-profile fields.
type multiWire struct {
	Prefix       *string        `json:"prefix,omitempty"`
	Paths        []string       `json:"paths,omitempty"`
	Versions     []versionField `json:"versions,omitempty"`
	Read         *int           `json:"read,omitempty"`
	SourceColumn string         `json:"source_column,omitempty"`
}

func (w *multiWire) set() bool {
	return w.Prefix != nil || w.Paths != nil || w.Versions != nil || w.Read != nil || w.SourceColumn != ""
}

// toMulti checks the multi-profile fields of a request (r has its read
// fields already; it names no profile of its own).
func (w *multiWire) toMulti(what string, r *Request, hasVersion bool) error {
	m := &MultiRead{Read: -1, SourceColumn: w.SourceColumn}
	switch {
	case w.Prefix != nil && w.Paths != nil:
		return fmt.Errorf("%w: %s has both \"prefix\" and \"paths\"; give one", ErrInvalid, what)
	case w.Prefix == nil && w.Paths == nil:
		return fmt.Errorf("%w: %s: \"versions\", \"read\" and \"source_column\" go with \"prefix\" or \"paths\"", ErrInvalid, what)
	case hasVersion:
		return fmt.Errorf("%w: %s reads several profiles: \"version\" names one profile's version (use \"versions\" with \"paths\")", ErrInvalid, what)
	case w.Prefix != nil:
		p, err := ParsePrefix(*w.Prefix)
		if err != nil {
			return fmt.Errorf("%w: %s %w", ErrInvalid, what, err)
		}
		if p == nil {
			p = []string{}
		}
		m.Prefix = p
		if w.Versions != nil || w.Read != nil {
			return fmt.Errorf("%w: %s: \"versions\" and \"read\" go with \"paths\"", ErrInvalid, what)
		}
	default:
		if len(w.Paths) == 0 || len(w.Paths) > MaxProfiles {
			return fmt.Errorf("%w: %s: \"paths\" wants 1 to %d profiles", ErrInvalid, what, MaxProfiles)
		}
		seen := map[string]bool{}
		for _, p := range w.Paths {
			keys, err := store.ParseKeys(p)
			if err != nil {
				return fmt.Errorf("%s paths: %w", what, err)
			}
			name := store.ProfilePath(keys)
			if seen[name] {
				return fmt.Errorf("%w: %s lists profile %q twice", ErrInvalid, what, truncate(name))
			}
			seen[name] = true
			m.Profiles = append(m.Profiles, keys)
		}
		if w.Versions != nil {
			if len(w.Versions) != len(w.Paths) {
				return fmt.Errorf("%w: %s has %d versions for %d paths", ErrInvalid, what, len(w.Versions), len(w.Paths))
			}
			for _, v := range w.Versions {
				m.Versions = append(m.Versions, v.n)
			}
		}
		if w.Read != nil {
			if *w.Read < 0 || *w.Read >= len(w.Paths) {
				return fmt.Errorf("%w: %s: \"read\" %d is not the index of one of its %d paths", ErrInvalid, what, *w.Read, len(w.Paths))
			}
			m.Read = *w.Read
		}
	}
	if r.Files != nil && m.Read < 0 {
		return fmt.Errorf("%w: %s reads several profiles: \"files\" needs \"read\" (the profile they belong to)", ErrInvalid, what)
	}
	r.Multi = m
	return nil
}

func (m *MultiRead) wire(w *multiWire) {
	if m.Prefix != nil {
		p := store.ProfilePath(m.Prefix)
		w.Prefix = &p
	}
	for _, k := range m.Profiles {
		w.Paths = append(w.Paths, store.ProfilePath(k))
	}
	for _, v := range m.Versions {
		w.Versions = append(w.Versions, versionField{n: v})
	}
	if m.Read >= 0 {
		read := m.Read
		w.Read = &read
	}
	w.SourceColumn = m.SourceColumn
}

// Describe names the profiles of a multi-profile read for logs.
func (m *MultiRead) Describe() string {
	if m.Prefix != nil {
		return store.ProfilePath(m.Prefix) + "/*"
	}
	names := make([]string, 0, len(m.Profiles))
	for i, k := range m.Profiles {
		if i == 3 {
			names = append(names, fmt.Sprintf("… (%d profiles)", len(m.Profiles)))
			break
		}
		names = append(names, store.ProfilePath(k))
	}
	return strings.Join(names, ",")
}

// Resolve lists the profiles under a multi-profile read's prefix (in
// lexical order) into its Profiles; a read by paths is left as it is. It
// returns the profiles, for the caller's access checks.
func (c *Catalog) Resolve(ctx context.Context, r *Request) ([][]string, error) {
	m := r.Multi
	if m == nil {
		return [][]string{r.Keys}, nil
	}
	if m.Prefix == nil {
		return m.Profiles, nil
	}
	var out [][]string
	err := c.st.ListProfiles(ctx, m.Prefix, func(ps store.ProfileSummary) error {
		if ps.Err != nil && !listedAnyway(ps.Err) {
			return unreadable(ps.Err) // (as List: p08)
		}
		if len(out) >= MaxProfiles {
			return fmt.Errorf("%w: more than %d profiles under %q", ErrInvalid, MaxProfiles, store.ProfilePath(m.Prefix))
		}
		out = append(out, ps.Keys)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no profile under the prefix %q", store.ErrNotFound, store.ProfilePath(m.Prefix))
	}
	m.Prefix, m.Profiles = nil, out
	return out, nil
}

func (m *MultiRead) version(i int) int {
	if m.Versions == nil {
		return Latest
	}
	return m.Versions[i]
}

// UnifySchemas unifies the schemas of several profiles (names name them
// in messages) under the rules of append widening: the same columns (in
// the first one's order); equal types (or equal but for nested names and
// metadata), or one a lossless widening of the other, the wider kept; a
// column is nullable if it is in any. The first schema's metadata is
// kept. The error wraps store.ErrSchemaMismatch and names the columns and
// profiles that differ.
func UnifySchemas(names []string, scs []*arrow.Schema) (*arrow.Schema, error) {
	if len(scs) == 0 {
		return nil, errors.New("no schema to unify")
	}
	fields := append([]arrow.Field{}, scs[0].Fields()...)
	from := make([]string, len(fields)) // the profile each field's type comes from
	for i := range from {
		from[i] = names[0]
	}
	for k := 1; k < len(scs); k++ {
		sc := scs[k]
		var missing, extra, bad []string
		for _, f := range fields {
			if len(sc.FieldIndices(f.Name)) == 0 {
				missing = append(missing, f.Name)
			}
		}
		for _, f := range sc.Fields() {
			found := false
			for _, g := range fields {
				found = found || g.Name == f.Name
			}
			if !found {
				extra = append(extra, f.Name)
			}
		}
		if len(missing)+len(extra) > 0 {
			var diff []string
			if len(missing) > 0 {
				diff = append(diff, names[k]+" lacks "+codec.QuoteNames(missing))
			}
			if len(extra) > 0 {
				diff = append(diff, names[k]+" adds "+codec.QuoteNames(extra))
			}
			return nil, fmt.Errorf("%w: the profiles' schemas do not unify: %s has columns %s, %s has %s (%s)",
				store.ErrSchemaMismatch, names[0], codec.QuoteNames(codec.FieldNames(scs[0])), names[k], codec.QuoteNames(codec.FieldNames(sc)),
				strings.Join(diff, ", "))
		}
		for i, f := range fields {
			g := sc.Field(sc.FieldIndices(f.Name)[0])
			switch {
			case arrow.TypeEqual(f.Type, g.Type) || codec.SameLayout(g.Type, f.Type) || codec.LosslessWidening(g.Type, f.Type):
			case codec.LosslessWidening(f.Type, g.Type):
				fields[i].Type, from[i] = g.Type, names[k]
			default:
				bad = append(bad, fmt.Sprintf("%q is %s in %s and %s in %s", f.Name, f.Type, from[i], g.Type, names[k]))
			}
			fields[i].Nullable = fields[i].Nullable || g.Nullable
		}
		if len(bad) > 0 {
			return nil, fmt.Errorf("%w: the profiles' schemas do not unify: %s (only lossless widenings such as int32→int64 unify)",
				store.ErrSchemaMismatch, strings.Join(bad, "; "))
		}
	}
	md := scs[0].Metadata()
	return arrow.NewSchema(fields, &md), nil
}

// multiSchema is the schema a multi-profile read streams: the unified
// schema of the profiles' versions, projected to r.Columns, with the
// source column last.
func (c *Catalog) multiSchema(ctx context.Context, r *Request) (*arrow.Schema, error) {
	m := r.Multi
	names := make([]string, len(m.Profiles))
	scs := make([]*arrow.Schema, len(m.Profiles))
	for i, keys := range m.Profiles {
		sc, err := c.st.Schema(ctx, keys, m.version(i))
		if err != nil {
			return nil, err
		}
		names[i], scs[i] = store.ProfilePath(keys), sc
	}
	u, err := UnifySchemas(names, scs)
	if err != nil {
		return nil, err
	}
	out, err := codec.Project(u, r.Columns)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", m.Describe(), err)
	}
	if m.SourceColumn != "" {
		if len(u.FieldIndices(m.SourceColumn)) > 0 {
			return nil, fmt.Errorf("%w: source_column %q is a column of the profiles already", store.ErrInvalidArgument, truncate(m.SourceColumn))
		}
		md := out.Metadata()
		out = arrow.NewSchema(append(append([]arrow.Field{}, out.Fields()...), arrow.Field{Name: m.SourceColumn, Type: arrow.BinaryTypes.String}), &md)
	}
	return out, nil
}

// MultiSchema resolves a multi-profile read and answers the schema it
// streams (GetSchema).
func (c *Catalog) MultiSchema(ctx context.Context, r *Request) (*arrow.Schema, error) {
	if _, err := c.Resolve(ctx, r); err != nil {
		return nil, err
	}
	return c.multiSchema(ctx, r)
}

func (m *MultiRead) snapshotOptions(r *Request, i int) store.SnapshotOptions {
	o := store.SnapshotOptions{Version: m.version(i), Partition: r.Partition, Filter: r.Filter}
	if m.Read == i {
		o.Files = r.Files
	}
	return o
}

// planMulti plans a multi-profile read: one snapshot per profile, pruned
// by partition and filter; endpoints per profile whose tickets pin every
// profile's version and their own profile's files. A limited read is one
// endpoint over all profiles (versions pinned; it stops at the limit).
func (c *Catalog) planMulti(ctx context.Context, r *Request, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	m := r.Multi
	if _, err := c.Resolve(ctx, r); err != nil {
		return nil, err
	}
	sns := make([]*store.Snapshot, len(m.Profiles))
	versions := make([]int, len(m.Profiles))
	for i, keys := range m.Profiles {
		if m.Read >= 0 && i != m.Read {
			versions[i] = m.version(i)
			continue
		}
		sn, err := c.st.Snapshot(ctx, keys, m.snapshotOptions(r, i))
		if err != nil {
			return nil, err
		}
		sns[i], versions[i] = sn, sn.Version
	}
	pinned := &MultiRead{Profiles: m.Profiles, Versions: versions, Read: -1, SourceColumn: m.SourceColumn}
	sc, err := c.multiSchema(ctx, &Request{Columns: r.Columns, Multi: pinned})
	if err != nil {
		return nil, err
	}
	if desc == nil {
		desc = &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: EncodeTicket(&Request{Multi: m, Version: Latest})}
	}
	info := &flight.FlightInfo{Schema: c.schemaBytes(sc), FlightDescriptor: desc, Ordered: true}
	var rows int64
	for i, sn := range sns {
		if sn == nil {
			continue
		}
		n, err := c.st.PruneSnapshot(ctx, sn)
		if err != nil {
			return nil, err
		}
		if rows >= 0 && n >= 0 {
			rows += n
		} else {
			rows = -1
		}
		info.TotalBytes += sn.Bytes()
		if r.Limit != nil {
			continue
		}
		ep := &MultiRead{Profiles: m.Profiles, Versions: versions, Read: i, SourceColumn: m.SourceColumn}
		t := &Request{Version: Latest, Columns: r.Columns, Partition: r.Partition, Filter: r.Filter, Multi: ep}
		groups, ok := c.groups(sn.Files, t)
		if !ok {
			// No file fits a ticket beside the rest of the read: one
			// endpoint reads the profile's pinned version.
			groups = [][]string{nil}
		}
		for _, group := range groups {
			et := *t
			et.Files = group
			b, err := endpointTicket(&et, fewerProfiles)
			if err != nil {
				return nil, err
			}
			info.Endpoint = append(info.Endpoint, &flight.FlightEndpoint{Ticket: &flight.Ticket{Ticket: b}})
		}
	}
	if r.Limit != nil {
		t := &Request{Version: Latest, Columns: r.Columns, Partition: r.Partition, Filter: r.Filter, Limit: r.Limit, Multi: pinned}
		b, err := endpointTicket(t, fewerProfiles)
		if err != nil {
			return nil, err
		}
		info.Endpoint = []*flight.FlightEndpoint{{Ticket: &flight.Ticket{Ticket: b}}}
		switch {
		case *r.Limit == 0:
			rows = 0
		case rows >= 0:
			rows = min(rows, *r.Limit)
		}
	}
	info.TotalRecords = rows
	return info, nil
}

// OpenMulti resolves a multi-profile read and streams it: each profile in
// turn (or the one its ticket names), its batches conformed to the
// unified schema, the source column added, stopping at the limit. The
// caller releases the reader; it must not outlive ctx.
func (c *Catalog) OpenMulti(ctx context.Context, r *Request) (*MultiReader, error) {
	if _, err := c.Resolve(ctx, r); err != nil {
		return nil, err
	}
	sc, err := c.multiSchema(ctx, r)
	if err != nil {
		return nil, err
	}
	mr := &MultiReader{c: c, ctx: ctx, r: r, out: sc, next: 0, left: -1, mem: c.opts.mem}
	if r.Multi.Read >= 0 {
		mr.next = r.Multi.Read
	}
	if r.Limit != nil {
		mr.left = *r.Limit
	}
	mr.refs.Store(1)
	return mr, nil
}

// MultiReader streams a multi-profile read (an array.RecordReader).
type MultiReader struct {
	refs atomic.Int64
	c    *Catalog
	ctx  context.Context
	r    *Request
	out  *arrow.Schema
	mem  memory.Allocator
	next int   // the next profile to open
	left int64 // rows the limit allows (-1: no limit)
	cur  *store.SnapshotReader
	src  arrow.Array // the current profile's source column values
	rec  arrow.RecordBatch
	err  error
}

// Retain adds a reference.
func (mr *MultiReader) Retain() { mr.refs.Add(1) }

// Release drops a reference; the last one frees everything.
func (mr *MultiReader) Release() {
	if mr.refs.Add(-1) == 0 {
		mr.clear()
		mr.closeCur()
	}
}

func (mr *MultiReader) clear() {
	if mr.rec != nil {
		mr.rec.Release()
		mr.rec = nil
	}
}

func (mr *MultiReader) closeCur() {
	if mr.cur != nil {
		mr.cur.Release()
		mr.cur = nil
	}
	if mr.src != nil {
		mr.src.Release()
		mr.src = nil
	}
}

// Schema is the unified (projected) schema.
func (mr *MultiReader) Schema() *arrow.Schema { return mr.out }

// RecordBatch is the current batch.
func (mr *MultiReader) RecordBatch() arrow.RecordBatch { return mr.rec }

// Record is the deprecated name of RecordBatch.
func (mr *MultiReader) Record() arrow.RecordBatch { return mr.rec }

// Err is the error that ended the read, if any.
func (mr *MultiReader) Err() error { return mr.err }

// Message is never available: batches are conformed, not cached ones.
func (mr *MultiReader) Message() (meta, body []byte, rows int64, ok bool) { return nil, nil, 0, false }

// Hold keeps nothing: batches are decoded memory, counted by Arrow.
func (mr *MultiReader) Hold() func() { return func() {} }

// Next moves to the next batch.
func (mr *MultiReader) Next() bool {
	mr.clear()
	if mr.err != nil || mr.left == 0 {
		return false
	}
	m := mr.r.Multi
	for {
		if mr.cur == nil {
			if mr.next >= len(m.Profiles) || (m.Read >= 0 && mr.next != m.Read) {
				return false
			}
			if err := mr.open(mr.next); err != nil {
				mr.err = err
				return false
			}
			mr.next++
		}
		if !mr.cur.Next() {
			if err := mr.cur.Err(); err != nil {
				mr.err = err
				return false
			}
			mr.closeCur()
			continue
		}
		in := mr.cur.RecordBatch()
		if in == nil {
			mr.err = mr.cur.Err()
			return false
		}
		rec, err := mr.conform(in)
		if err != nil {
			mr.err = err
			return false
		}
		if mr.left >= 0 {
			if rec.NumRows() > mr.left {
				sl := rec.NewSlice(0, mr.left)
				rec.Release()
				rec = sl
			}
			mr.left -= rec.NumRows()
		}
		mr.rec = rec
		return true
	}
}

// open starts the read of profile i.
func (mr *MultiReader) open(i int) error {
	m := mr.r.Multi
	keys := m.Profiles[i]
	sn, err := mr.c.st.Snapshot(mr.ctx, keys, m.snapshotOptions(mr.r, i))
	if err != nil {
		return err
	}
	cols := codec.FieldNames(mr.out)
	if m.SourceColumn != "" {
		cols = cols[:len(cols)-1]
	}
	o := store.ReadOptions{Columns: cols, BatchBytes: mr.c.opts.batchBytes, Join: true}
	if mr.left > 0 {
		o.Limit = mr.left
	}
	rdr, err := mr.c.st.ReadSnapshot(mr.ctx, sn, o)
	if err != nil {
		return err
	}
	mr.cur = rdr
	if m.SourceColumn != "" {
		b := array.NewStringBuilder(mr.mem)
		defer b.Release()
		b.Append(store.ProfilePath(keys))
		mr.src = b.NewArray()
	}
	return nil
}

// conform casts a profile's batch to the unified schema and adds the
// source column.
func (mr *MultiReader) conform(in arrow.RecordBatch) (arrow.RecordBatch, error) {
	n := in.NumRows()
	cols := make([]arrow.Array, mr.out.NumFields())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i := range int(in.NumCols()) {
		c, err := codec.ConformArray(mr.ctx, in.Column(i), mr.out.Field(i).Type)
		if err != nil {
			return nil, fmt.Errorf("read %s: column %q: %w", mr.r.Multi.Describe(), mr.out.Field(i).Name, err)
		}
		cols[i] = c
	}
	if mr.r.Multi.SourceColumn != "" {
		// One value repeated: a dictionary would be smaller, but the
		// column is a plain string so that every client reads it.
		b := array.NewStringBuilder(mr.mem)
		v := mr.src.(*array.String).Value(0)
		b.Reserve(int(n))
		b.ReserveData(int(n) * len(v))
		for range n {
			b.Append(v)
		}
		cols[len(cols)-1] = b.NewArray()
		b.Release()
	}
	return array.NewRecordBatch(mr.out, cols, n), nil
}

// fewerProfiles is what a read of several profiles whose endpoint ticket
// is too large may do about it.
const fewerProfiles = "a shorter filter or column list, or fewer profiles"
