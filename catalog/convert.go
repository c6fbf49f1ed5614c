package catalog

import (
	"github.com/quiverdb/quiver/store"
	"github.com/quiverdb/quiver/store/maint"
)

// The …From functions build the wire results from the store's. They copy
// nil slices as nil (a result's JSON shows null where the store's did);
// callers that promise a list ([] rather than null) set it themselves.

// PutResultFrom is the wire form of a commit record.
func PutResultFrom(cr *store.CommitRecord) *PutResult {
	r := &PutResult{
		Path:          cr.Path,
		Keys:          cr.Keys,
		Version:       cr.Version,
		Index:         cr.Index,
		Mode:          string(cr.Mode),
		Format:        string(cr.Format),
		Rows:          cr.Rows,
		SchemaVersion: cr.SchemaVersion,
		Committed:     cr.Committed,
		Writer:        cr.Writer,
		RequestID:     cr.RequestID,
		Metadata:      cr.Metadata,
		Seq:           cr.Seq,
		Prev:          cr.Prev,
		VersionInfo:   cr.VersionInfo,
		Adopted:       cr.Adopted,
		Schema:        cr.Schema,
		Signer:        cr.Signer,
		Sig:           cr.Sig,
	}
	if cr.Files != nil {
		r.Files = make([]FileRecord, len(cr.Files))
		for i, f := range cr.Files {
			r.Files[i] = FileRecord{Path: f.Path, Rows: f.Rows, Bytes: f.Bytes, SHA256: f.SHA256, Partition: f.Partition, Offset: f.Offset, FileRows: f.FileRows}
		}
	}
	return r
}

// ListVersionsResultFrom is the wire form of store.Versions' answer for
// the profile keys.
func ListVersionsResultFrom(keys []string, latest int, vs []store.VersionSummary) *ListVersionsResult {
	r := &ListVersionsResult{Path: store.ProfilePath(keys), Latest: store.VersionName(latest)}
	if vs != nil {
		r.Versions = make([]VersionSummary, len(vs))
		for i, v := range vs {
			r.Versions[i] = VersionSummary{
				Version: v.Version, Files: v.Files, Rows: v.Rows, Bytes: v.Bytes, Created: v.Created,
				Format: string(v.Format), SchemaVersion: v.SchemaVersion, PartitionBy: v.PartitionBy,
				Commits: v.Commits, LastCommit: v.LastCommit,
			}
			for _, c := range v.SchemaVersions {
				r.Versions[i].SchemaVersions = append(r.Versions[i].SchemaVersions, SchemaVersionCount{SchemaVersion: c.SchemaVersion, Files: c.Files, Rows: c.Rows})
			}
		}
	}
	return r
}

// VerifyResultFrom is the wire form of a verify report.
func VerifyResultFrom(rep *maint.VerifyReport) *VerifyResult {
	r := &VerifyResult{OK: rep.OK, CheckedFiles: rep.CheckedFiles, Seed: rep.Seed}
	for _, h := range rep.Heads {
		r.Heads = append(r.Heads, ChainHead{Path: h.Path, Seq: h.Seq, Hash: h.Hash})
	}
	if rep.Problems != nil {
		r.Problems = make([]Problem, len(rep.Problems))
		for i, p := range rep.Problems {
			r.Problems[i] = Problem{Kind: p.Kind, Path: p.Path, Detail: p.Detail}
		}
	}
	return r
}

// RemoveOldVersionsResultFrom is the wire form of a retention report.
func RemoveOldVersionsResultFrom(rep *maint.RetentionReport) *RemoveOldVersionsResult {
	r := &RemoveOldVersionsResult{Removed: rep.Removed}
	if rep.Kept != nil {
		r.Kept = make([]KeptVersion, len(rep.Kept))
		for i, k := range rep.Kept {
			r.Kept[i] = KeptVersion{Version: k.Version, Reason: k.Reason}
		}
	}
	return r
}

// SweepResultFrom is the wire form of a sweep report.
func SweepResultFrom(rep *maint.SweepReport) *SweepResult {
	// Every list is there, empty or not (red team round 37's s21).
	r := &SweepResult{Removed: nonNil(rep.Removed), Settled: nonNil(rep.Settled), Skipped: []Problem{}}
	for _, p := range rep.Skipped {
		r.Skipped = append(r.Skipped, Problem{Kind: p.Kind, Path: p.Path, Detail: p.Detail})
	}
	return r
}

// nonNil is s, or an empty slice for nil (a JSON [] rather than null).
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// SchemaPolicyResultFrom is the wire form of a profile's schema policy.
func SchemaPolicyResultFrom(keys []string, sp *store.SchemaPolicy) *SchemaPolicyResult {
	return &SchemaPolicyResult{Path: store.ProfilePath(keys), SchemaPolicy: sp.SchemaPolicy, Set: sp.Set, Writer: sp.Writer}
}

// BreakLockResultFrom is the wire form of a break-lock result.
func BreakLockResultFrom(res *store.BreakLockResult) *BreakLockResult {
	return &BreakLockResult{Broken: res.Broken, Reason: res.Reason}
}
