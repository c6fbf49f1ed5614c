package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/util"

	"github.com/quiverdb/quiver/store/codec"
	"github.com/quiverdb/quiver/store/fsys"
)

// Small appends share a data file.
//
// A file of its own costs a small append more than its rows: creating it
// takes 0.02–1 ms of kernel CPU on an ext4 volume, depending on the
// journal (docs/benchmarks.md, BenchmarkFileSyscalls), and zstd, the
// footer and the hash are paid per file, on pages of a few KiB. So an
// unpartitioned Parquet append whose rows fit in
// the group limit (WithGroupAppendBytes) writes no file while it streams:
// it holds its validated, conformed batches (staged.pending). The commit
// cycle that accepts it writes the pending rows of all the appends it
// commits to one version and schema into one file, claimed and numbered
// as any other (pyrosome reads it as one more part file), synced before
// the records. Each append keeps its own record: its request id, its
// rows, and the file with its SHA-256, the rows' Offset in it and the
// file's FileRows. The records of one cycle are one segment of the log:
// they become visible together, so a reader that sees one of them sees
// the whole file's rows, and reads the file once (appendRecordedFiles).

// DefaultGroupAppendBytes is the default of WithGroupAppendBytes.
const DefaultGroupAppendBytes = 1 << 20

// WithGroupAppendBytes sets how many bytes of Arrow data an unpartitioned
// Parquet append may hold in memory for its commit cycle to write, with
// the other small appends of that cycle, into one shared file; a larger
// append writes its own file as it streams. 0 turns sharing off.
func WithGroupAppendBytes(n int64) Option { return func(o *options) { o.groupBytes = max(n, 0) } }

// groupRequestIDsKey is the footer key of a shared file: the request ids
// of the appends whose rows it holds, in order, as a JSON array ("" for
// an append without one).
const groupRequestIDsKey = "quiver.request_ids"

// appendRecordedFiles appends the files recs list to dst, each once: a
// file appends of one cycle share is one DataFile of the whole file's
// rows, however many of their records list it.
func appendRecordedFiles(dst []DataFile, recs []*CommitRecord, absent []string) []DataFile {
	var seen map[string]bool
	for _, r := range recs {
		for _, f := range r.Files {
			if f.Shared() {
				if seen == nil {
					seen = make(map[string]bool, len(dst)+1)
					for _, d := range dst {
						seen[d.Path] = true
					}
				}
				if seen[f.Path] {
					continue
				}
				seen[f.Path] = true
			}
			dst = append(dst, DataFile{Path: f.Path, Index: indexOfPath(f.Path, r.Index), Rows: f.fileRows(), Bytes: f.Bytes,
				SHA256: f.SHA256, Partition: f.Partition, Recorded: true, absent: absent})
		}
	}
	return dst
}

// holdPending keeps fb (a conformed batch of the file schema) for the
// commit cycle's shared file. It reports false, holding nothing new, once
// the put's rows outgrow the group limit or the memory budget is spent:
// the put then writes a file of its own (takePending hands back what it
// held).
func (s *Store) holdPending(st *staged, fb arrow.RecordBatch) bool {
	n := util.TotalRecordSize(fb)
	if st.pendingBytes+n > s.opts.groupBytes || s.budget.over() {
		return false
	}
	fb.Retain()
	st.pending = append(st.pending, fb)
	st.pendingBytes += s.budget.adjust(n)
	st.rows += fb.NumRows()
	return true
}

// takePending ends st's holding: it returns the batches held (the
// caller releases them) and gives their memory back to the budget.
func (s *Store) takePending(st *staged) []arrow.RecordBatch {
	out := st.pending
	s.budget.release(st.pendingBytes)
	st.pending, st.pendingBytes = nil, 0
	st.rows = 0
	return out
}

// dropPending releases what st holds for a shared file.
func (s *Store) dropPending(st *staged) {
	for _, r := range s.takePending(st) {
		r.Release()
	}
}

// pendingReader reads back the rows st holds (for a put that moves to
// another version before its cycle wrote them).
func pendingReader(st *staged) (array.RecordReader, error) {
	return array.NewRecordReader(codec.FileSchema(st.schema, st.by), st.pending)
}

// writeGroups writes the shared files of the grouped appends among the
// accepted puts of a cycle (recs[j] is batch[accepted[j]]'s record), one
// file per version and schema, and fills in their records. A put whose
// file could not be written gets its error in res and leaves recs and
// accepted, which are returned with the files' writers, for the cycle to
// commit (commitSegment) or abort.
func (s *Store) writeGroups(ctx context.Context, ps *profileState, batch []*commitReq, res []commitResult, recs []*CommitRecord, accepted []int) ([]*CommitRecord, []int, []fsys.Writer) {
	type group struct {
		st      *staged
		schema  string // the records' Schema (evolution)
		members []int  // positions in recs
	}
	var groups []*group
	for j, i := range accepted {
		st := batch[i].st
		if !st.grouped {
			continue
		}
		var g *group
		for _, h := range groups {
			if h.st.version == st.version && h.st.schemaV == st.schemaV && h.schema == recs[j].Schema &&
				h.st.schema.Equal(st.schema) && h.st.schema.Metadata().String() == st.schema.Metadata().String() {
				g = h
				break
			}
		}
		if g == nil {
			g = &group{st: st, schema: recs[j].Schema}
			groups = append(groups, g)
		}
		g.members = append(g.members, j)
	}
	if len(groups) == 0 {
		return recs, accepted, nil
	}
	failed := map[int]bool{}
	var files []fsys.Writer // written, not yet committed
	// write writes the file of members (positions in recs) and fills in
	// their records; a file of several that fails is written again as a
	// file per append, so that one append whose rows cannot be stored
	// (a value that passed the checks at its arrival and fails the
	// encoding: red team round 14's g01) fails alone, with its own error.
	var write func(members []int)
	write = func(members []int) {
		sts := make([]*staged, len(members))
		var rows int64
		for k, j := range members {
			sts[k] = batch[accepted[j]].st
			rows += sts[k].rows
		}
		if len(members) > 1 && rows == 0 {
			// Appends of no rows: a shared file of 0 rows could not say
			// whose it is (file_rows 0), so each gets its own (g02).
			for _, j := range members {
				write([]int{j})
			}
			return
		}
		entries, w, err := s.writeShared(ctx, ps, sts)
		if err != nil && len(members) > 1 {
			for _, j := range members {
				write([]int{j})
			}
			return
		}
		if err == nil {
			files = append(files, w)
		}
		for k, j := range members {
			if err != nil {
				res[accepted[j]].err = err
				failed[j] = true
				continue
			}
			recs[j].Index, recs[j].Files = sts[k].index, []FileRecord{entries[k]}
		}
	}
	for _, g := range groups {
		write(g.members)
	}
	if len(failed) == 0 {
		return recs, accepted, files
	}
	var keptRecs []*CommitRecord
	var kept []int
	for j := range recs {
		if !failed[j] {
			keptRecs, kept = append(keptRecs, recs[j]), append(kept, accepted[j])
		}
	}
	return keptRecs, kept, files
}

// writeShared writes the rows sts hold (appends to one version, of one
// schema) into one new data file of that version and returns each put's
// file entry, and the file's writer: its commit (content synced, name
// linked) is the cycle's, with the sync of the segment (commitSegment),
// or its abort. The puts then hold the file (staged.files, staged.share)
// and no rows: should they fail, discarding them removes it; a later
// attempt of the cycle commits them as it would any staged append.
func (s *Store) writeShared(ctx context.Context, ps *profileState, sts []*staged) (out []FileRecord, file fsys.Writer, err error) {
	first := sts[0]
	p := ps.p
	idx, err := s.claimIndex(ctx, ps, first.version, first.format)
	if err != nil {
		return nil, nil, err
	}
	name := path.Join(p.vdir(first.version), dataFileName(idx, first.format))
	wopts := codec.WriterOptions{Format: first.format, Compression: s.opts.compression,
		RowGroupRows: s.opts.rowGroupRows, Allocator: s.opts.mem,
		Metadata: map[string]string{SchemaVersionKey: first.schemaV, putIDKey: newPutID()}}
	if len(sts) == 1 {
		if id := first.o.RequestID; id != "" {
			wopts.Metadata[requestIDKey] = id
			wopts.Metadata[writerKey] = s.writerOf(first.o)
		}
	} else {
		ids := make([]string, len(sts))
		some := false
		for k, st := range sts {
			ids[k] = st.o.RequestID
			some = some || ids[k] != ""
		}
		if some {
			b, _ := json.Marshal(ids)
			wopts.Metadata[groupRequestIDsKey] = string(b)
		}
	}
	w, err := fsys.CreateSync(ctx, s.fs, name, fsys.SyncContent)
	if err != nil {
		return nil, nil, fmt.Errorf("write %s: %w", p, err)
	}
	fw, err := codec.NewFileWriter(w, codec.FileSchema(first.schema, first.by), wopts)
	if err != nil {
		_ = w.Abort()
		return nil, nil, fmt.Errorf("%s: %w", p, err)
	}
	defer func() {
		if err != nil {
			fw.Abort()
			_ = w.Abort()
			s.removeShared(&sharedFile{name: name, claim: path.Join(p.vdir(first.version), claimName(idx, first.format))})
		}
	}()
	offsets := make([]int64, len(sts))
	var rows int64
	for k, st := range sts {
		offsets[k] = rows
		for _, rec := range st.pending {
			if err = fw.Write(rec); err != nil {
				return nil, nil, fmt.Errorf("%s: %w", p, err)
			}
			if fw.RowGroupBytes() >= s.opts.rowGroupBytes {
				if err = fw.EndRowGroup(); err != nil {
					return nil, nil, fmt.Errorf("%s: %w", p, err)
				}
			}
			rows += rec.NumRows()
		}
	}
	if err = fw.Close(); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", p, err)
	}
	rel := strings.TrimPrefix(name, p.dir+"/")
	sh := &sharedFile{name: name, claim: path.Join(p.vdir(first.version), claimName(idx, first.format))}
	sh.refs.Store(int32(len(sts)))
	out = make([]FileRecord, len(sts))
	for k, st := range sts {
		f := FileRecord{Path: rel, Rows: st.rows, Bytes: fw.Size(), SHA256: fw.SHA256()}
		if len(sts) > 1 {
			f.Offset, f.FileRows = offsets[k], rows
		}
		out[k] = f
		s.dropPending(st)
		st.rows = f.Rows
		st.index, st.files, st.grouped = idx, []FileRecord{f}, false
		// The file and its claim are the group's: they go when every put
		// of the group failed (discard).
		st.claims, st.share = nil, sh
	}
	return out, &sharedCommit{Writer: w, sh: sh}, nil
}

// sharedCommit is a shared file's writer as the cycle commits it: its
// commit notes a name found taken (another's file, which discarding the
// puts then leaves alone, with the claim).
type sharedCommit struct {
	fsys.Writer
	sh *sharedFile
}

// Commit implements fsys.Writer.
func (c *sharedCommit) Commit(ctx context.Context) error {
	err := c.Writer.Commit(ctx)
	if errors.Is(err, fsys.ErrExist) {
		c.sh.taken.Store(true)
	}
	return err
}

// sliceReader reads the rows [off, off+n) of rdr.
type sliceReader struct {
	array.RecordReader
	off, n int64
	cur    arrow.RecordBatch
}

func (r *sliceReader) Next() bool {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	for r.n > 0 && r.RecordReader.Next() {
		rec := r.RecordReader.RecordBatch()
		rows := rec.NumRows()
		if r.off >= rows {
			r.off -= rows
			continue
		}
		end := min(rows, r.off+r.n)
		r.cur = rec.NewSlice(r.off, end)
		r.n -= end - r.off
		r.off = 0
		return true
	}
	return false
}

func (r *sliceReader) RecordBatch() arrow.RecordBatch { return r.cur }

// Record is RecordBatch (arrow-go's interface still has it).
func (r *sliceReader) Record() arrow.RecordBatch { return r.cur }

func (r *sliceReader) Release() {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	r.RecordReader.Release()
}

// sharedFile is a file the appends of one cycle share, and its claim.
type sharedFile struct {
	name, claim string
	refs        atomic.Int32 // the puts of the group not yet discarded
	taken       atomic.Bool  // its name was another's (its commit found it existing)
}

// removeShared deletes a shared file no put committed (its name, if it
// was linked: a failed commit may have linked it), then its claim (never
// the claim while the file may exist). Nothing, if the name was taken:
// the file there is another writer's, and its index too (red team round
// 39's f01: it was deleted, rows readers had seen).
func (s *Store) removeShared(sh *sharedFile) {
	ctx := context.Background()
	if sh.taken.Load() {
		return
	}
	if err := s.fs.Delete(ctx, sh.name); err != nil && !isNotExist(err) {
		s.opts.log.Error().Err(err).Str("file", sh.name).Msg("could not remove the shared file of failed appends; sweep will")
		return
	}
	if err := s.fs.Delete(ctx, sh.claim); err != nil && !isNotExist(err) {
		s.opts.log.Warn().Err(err).Str("file", sh.claim).Msg("could not remove the claim of failed appends")
	}
}
