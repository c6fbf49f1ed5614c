package maint_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/quiverdb/quiver/store"
	"github.com/quiverdb/quiver/store/maint"
)

// TestEvolvedProfileVerifiesAndSweeps: a profile whose schema evolved by
// appends, under the additive policy, verifies clean; sweep leaves its
// policy file and every file alone; a policy file that does not parse is
// reported as mutated and still not swept.
func TestEvolvedProfileVerifiesAndSweeps(t *testing.T) {
	s, dir := newStore(t)
	ctx := context.Background()
	keys := []string{"evo"}
	put(t, s, store.ModeWrite, keys, ids(1, 2), store.PutOptions{SchemaVersion: "1.0.0", SchemaPolicy: store.PolicyAdditive})
	wide := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "note", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	put(t, s, store.ModeAppend, keys, fromJSON(t, wide, `[{"id":3,"note":"n"}]`), store.PutOptions{SchemaVersion: "1.1.0"})
	rep, err := maint.Verify(ctx, s, maint.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK {
		t.Fatalf("verify: %v", problems(rep.Problems))
	}
	before := hashTree(t, dir)
	for _, f := range []string{".quiver.policy.json"} {
		touchOld(t, filepath.Join(dir, "evo", f), 48*time.Hour)
	}
	sw, err := maint.Sweep(ctx, s, time.Nanosecond)
	if err != nil {
		t.Fatal(err)
	}
	if len(sw.Removed) > 0 || len(sw.Skipped) > 0 {
		t.Errorf("sweep removed %v, skipped %v", sw.Removed, sw.Skipped)
	}
	if after := hashTree(t, dir); !reflect.DeepEqual(before, after) {
		t.Error("sweep changed the data directory")
	}
	pol := filepath.Join(dir, "evo", ".quiver.policy.json")
	if err := os.WriteFile(pol, []byte("{\"schema_policy\":\"strict\"}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if rep, err = maint.Verify(ctx, s, maint.VerifyOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := problems(rep.Problems); rep.OK || len(got) != 1 || !strings.Contains(got[0], "mutated evo/.quiver.policy.json") {
		t.Errorf("verify of a bad policy file: %v", got)
	}
	if _, err := maint.Sweep(ctx, s, time.Nanosecond); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(pol); err != nil {
		t.Errorf("sweep removed the policy file: %v", err)
	}
}
