package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

// TestSchemaPolicyWrites: under the additive policy a write of a new
// version may keep the previous version's columns or add nullable ones
// under a higher schema version; anything else is refused before anything
// is written. Without the policy any schema goes.
func TestSchemaPolicyWrites(t *testing.T) {
	idStr := arrow.Field{Name: "id", Type: arrow.BinaryTypes.String, Nullable: true}
	id32 := arrow.Field{Name: "id", Type: arrow.PrimitiveTypes.Int32, Nullable: true}
	notNullX := arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Float64}
	cases := []struct {
		name string
		sc   *arrow.Schema
		rows string
		sv   string
		want string // "" when allowed under the policy
	}{
		{"same schema, same version", evoSchema(fName, fID), `[{"id":1,"name":"a"}]`, "1.0.0", ""},
		{"same schema, higher version", evoSchema(fID, fName), `[{"id":1,"name":"a"}]`, "1.0.1", ""},
		{"new nullable column, higher version", evoSchema(fID, fName, fX), `[{"id":1,"name":"a","x":1}]`, "1.1.0", ""},
		{"new nullable column, same version", evoSchema(fID, fName, fX), `[{"id":1,"name":"a","x":1}]`, "1.0.0", "send schema_version above"},
		{"new non-nullable column", evoSchema(fID, fName, notNullX), `[{"id":1,"name":"a","x":1}]`, "1.1.0", "non-nullable"},
		{"dropped column", evoSchema(fID), `[{"id":1}]`, "1.1.0", `columns ["name"] of the previous version are missing`},
		{"retyped column", evoSchema(idStr, fName), `[{"id":"1","name":"a"}]`, "1.1.0", `"id" is utf8, was int64`},
		{"narrowed column", evoSchema(id32, fName), `[{"id":1,"name":"a"}]`, "1.1.0", `"id" is int32, was int64`},
		{"lower version", evoSchema(fID, fName), `[{"id":1,"name":"a"}]`, "0.9.0", "not above"},
		{"no version", evoSchema(fID, fName), `[{"id":1,"name":"a"}]`, "", "has no schema_version"},
	}
	for _, tc := range cases {
		for _, policy := range []string{PolicyAdditive, ""} {
			t.Run(tc.name+"/"+policy, func(t *testing.T) {
				s, dir := newTestStore(t)
				keys := []string{"pol"}
				put(t, s, ModeWrite, keys, fromJSON(t, evoSchema(fID, fName), `[{"id":0,"name":"z"}]`), PutOptions{SchemaVersion: "1.0.0", SchemaPolicy: policy})
				before := hashTree(t, dir)
				rdr := fromJSON(t, tc.sc, tc.rows)
				defer rdr.Release()
				_, err := s.Put(context.Background(), keys, rdr, PutOptions{Mode: ModeWrite, SchemaVersion: tc.sv})
				if tc.want == "" || policy == "" {
					if err != nil {
						t.Fatal(err)
					}
					return
				}
				if !errors.Is(err, ErrSchemaMismatch) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "schema policy is additive") {
					t.Fatalf("err %v, want a refusal saying %q", err, tc.want)
				}
				if after := hashTree(t, dir); !reflect.DeepEqual(before, after) {
					t.Errorf("the data directory changed")
				}
			})
		}
	}
}

// TestSchemaPolicyFile: the policy is set by the first put or by SetPolicy,
// kept in .quiver.policy.json, refused when a later put names another, and
// checked against the evolved schema of the previous version.
func TestSchemaPolicyFile(t *testing.T) {
	s, dir := newTestStore(t)
	ctx := context.Background()
	keys := []string{"a", "b"}
	put(t, s, ModeAppend, keys, fromJSON(t, evoSchema(fID), `[{"id":0}]`), PutOptions{SchemaVersion: "1.0.0", SchemaPolicy: PolicyAdditive})
	b, err := os.ReadFile(filepath.Join(dir, "a", "b", policyName))
	if err != nil || !strings.Contains(string(b), `"schema_policy": "additive"`) {
		t.Fatalf("policy file %q, %v", b, err)
	}
	if sp, err := s.Policy(ctx, keys); err != nil || sp.SchemaPolicy != PolicyAdditive {
		t.Fatalf("policy %+v, %v", sp, err)
	}
	// A put naming another policy is refused; naming the same one is fine.
	rdr := ids(1)
	_, err = s.Put(ctx, keys, rdr, PutOptions{SchemaPolicy: PolicyNone})
	rdr.Release()
	if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "set-schema-policy") {
		t.Fatalf("err %v", err)
	}
	put(t, s, ModeAppend, keys, ids(1), PutOptions{SchemaPolicy: PolicyAdditive})
	// An append evolves v0; a write must then keep x.
	put(t, s, ModeAppend, keys, fromJSON(t, evoSchema(fID, fX), `[{"id":2,"x":1}]`), PutOptions{SchemaVersion: "1.1.0"})
	rdr = ids(3)
	_, err = s.Put(ctx, keys, rdr, PutOptions{Mode: ModeWrite, SchemaVersion: "1.1.0"})
	rdr.Release()
	if !errors.Is(err, ErrSchemaMismatch) || !strings.Contains(err.Error(), `["x"]`) {
		t.Fatalf("write dropping x under the policy: %v", err)
	}
	put(t, s, ModeWrite, keys, fromJSON(t, evoSchema(fID, fX), `[{"id":3,"x":1}]`), PutOptions{SchemaVersion: "1.1.0"})
	// An admin lifts the contract.
	if _, err := s.SetPolicy(ctx, keys, PolicyNone, ""); err != nil {
		t.Fatal(err)
	}
	put(t, s, ModeWrite, keys, ids(4), PutOptions{SchemaVersion: "0.1.0"})
	if _, err := s.SetPolicy(ctx, keys, "strict", ""); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("unknown policy: %v", err)
	}
	if _, err := s.SetPolicy(ctx, []string{"nope"}, PolicyAdditive, ""); !errors.Is(err, ErrNotFound) {
		t.Errorf("policy of a missing profile: %v", err)
	}
	// Inspect knows the file.
	in, err := s.Inspect(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Unknown) > 0 || in.PolicyErr != nil || in.Policy != PolicyNone {
		t.Errorf("inspect: unknown %v, policy %q, err %v", in.Unknown, in.Policy, in.PolicyErr)
	}
	// A damaged policy file is reported, and reads go on.
	if err := os.WriteFile(filepath.Join(dir, "a", "b", policyName), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if in, err = s.Inspect(ctx, keys); err != nil || in.PolicyErr == nil {
		t.Errorf("inspect of a damaged policy: %v, %v", in, err)
	}
	readAll(t, s, keys, ReadOptions{SnapshotOptions: SnapshotOptions{Version: Latest}})
}

// TestPolicyNameIsNoKey: no key can name the policy file.
func TestPolicyNameIsNoKey(t *testing.T) {
	s, _ := newTestStore(t)
	for _, keys := range [][]string{{policyName}, {"a", policyName}} {
		rdr := ids(1)
		_, err := s.Put(context.Background(), keys, rdr, PutOptions{})
		rdr.Release()
		if !errors.Is(err, ErrInvalidKey) {
			t.Errorf("put to %v: %v, want ErrInvalidKey", keys, err)
		}
	}
}

// TestSchemaPolicyCheckedAtCommit: a write staged while the previous
// version still fitted is checked again at its commit, against the version
// latest then: an append that added a column meanwhile makes a write
// without it break the contract, and it is refused (its files removed).
func TestSchemaPolicyCheckedAtCommit(t *testing.T) {
	s, dir := newTestStore(t)
	ctx := context.Background()
	keys := []string{"pc"}
	put(t, s, ModeWrite, keys, fromJSON(t, evoSchema(fID), `[{"id":1}]`), PutOptions{SchemaVersion: "1.0.0", SchemaPolicy: PolicyAdditive})
	p, err := s.resolve(keys)
	if err != nil {
		t.Fatal(err)
	}
	ps := s.state(p)
	rdr := fromJSON(t, evoSchema(fID), `[{"id":2}]`)
	defer rdr.Release()
	st, err := s.stageVersion(ctx, ps, rdr, PutOptions{Mode: ModeWrite, SchemaVersion: "1.0.0"}, false)
	if err != nil {
		t.Fatal(err)
	}
	put(t, s, ModeAppend, keys, fromJSON(t, evoSchema(fID, fX), `[{"id":3,"x":1}]`), PutOptions{SchemaVersion: "1.1.0"})
	res := s.commitStaged(ctx, ps, st)
	if res.rec != nil || !errors.Is(res.err, ErrSchemaMismatch) || !strings.Contains(res.err.Error(), `["x"]`) {
		t.Fatalf("commit of the stale write: rec %v, err %v", res.rec, res.err)
	}
	s.discard(ps, st)
	if _, err := os.Stat(filepath.Join(dir, "pc", VersionName(st.version))); !os.IsNotExist(err) {
		t.Errorf("the refused write's version is still there: %v", err)
	}
	_, rows := readAll(t, s, keys, ReadOptions{SnapshotOptions: SnapshotOptions{Version: Latest}})
	if rows != `[{"id":1,"x":null},{"id":3,"x":1}]` {
		t.Errorf("rows %s", rows)
	}
}
