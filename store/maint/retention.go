package maint

import (
	"context"
	"fmt"
	"time"

	"github.com/quiverdb/quiver/store"
)

// DefaultRetentionGrace is how long a superseded version is kept for
// readers still holding tickets for it, unless told otherwise.
const DefaultRetentionGrace = time.Hour

// RetentionReport is the result of RemoveOldVersions.
type RetentionReport struct {
	Removed []string `json:"removed"`
	// Kept are old versions beyond keep that were not removed, and why.
	Kept []KeptVersion `json:"kept,omitempty"`
}

// KeptVersion is an old version RemoveOldVersions left in place.
type KeptVersion struct {
	Version string `json:"version"`
	Reason  string `json:"reason"`
}

// RemoveOldVersions retires all but the newest keep versions of a profile:
// never the latest, never a single file inside a version, and never a
// version superseded less than grace ago (readers holding tickets for it
// are still reading). The time a version was superseded is the commit time
// of the next version's write record (the creation time in its
// .version.json for older data), never a file's modification time; a
// version whose successor's time is unknown is kept unless grace is 0.
// Each retired version gets a retire record in the commit log before its
// directory is deleted.
func RemoveOldVersions(ctx context.Context, st *store.Store, keys []string, keep int, grace time.Duration, writer string) (*RetentionReport, error) {
	if keep < 1 {
		return nil, fmt.Errorf("%w: keep must be at least 1 (the latest version is never removed)", store.ErrInvalidArgument)
	}
	if grace < 0 {
		return nil, fmt.Errorf("%w: negative grace period", store.ErrInvalidArgument)
	}
	now := st.Now()
	rep := &RetentionReport{}
	removed, err := st.RetireVersions(ctx, keys, writer, func(latest int, cands []store.RetireCandidate) []int {
		// cands are the committed versions below the latest, oldest
		// first; the latest counts as one of the kept.
		n := len(cands) - (keep - 1)
		var out []int
		for _, c := range cands[:max(0, n)] {
			switch {
			case grace > 0 && c.Superseded.IsZero():
				rep.Kept = append(rep.Kept, KeptVersion{store.VersionName(c.Version), "when it was superseded is unknown; only a grace of 0 removes it"})
			case grace > 0 && now.Sub(c.Superseded) < grace:
				rep.Kept = append(rep.Kept, KeptVersion{store.VersionName(c.Version), fmt.Sprintf("superseded %s ago, within the grace period of %s", now.Sub(c.Superseded).Round(time.Second), grace)})
			default:
				out = append(out, c.Version)
			}
		}
		return out
	})
	if err != nil {
		return nil, err
	}
	rep.Removed = removed
	return rep, nil
}
