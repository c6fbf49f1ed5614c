package main

import (
	"strings"
	"testing"
)

// TestSchemaEvolutionCommands: put --schema-version adds a column, put
// --schema-policy sets the contract, versions shows each schema version's
// files and rows and the policy (the same online and offline), and
// schema-policy changes it.
func TestSchemaEvolutionCommands(t *testing.T) {
	addr, dir := testServer(t)
	srv := "--server=" + addr
	a := writeCSV(t, "a.csv", "id,region\n1,eu\n2,us\n")
	b := writeCSV(t, "b.csv", "id,region,amount\n3,eu,1.5\n")
	mustRun(t, "put", srv, "--progress=never", "--mode", "write", "--schema-version", "1.0.0", "--schema-policy", "additive", "evo/p", a)
	if _, stderr, err := run(t, "put", srv, "--progress=never", "evo/p", b); err == nil || !strings.Contains(stderr+err.Error(), "schema_version above") {
		t.Fatalf("an added column without a version: %v %s", err, stderr)
	}
	mustRun(t, "put", srv, "--progress=never", "--schema-version", "1.1.0", "evo/p", b)
	for _, args := range [][]string{{"versions", "evo/p"}, {"versions", "--json", "evo/p"}, {"schema", "evo/p"}} {
		on := mustRun(t, append([]string{args[0], srv}, args[1:]...)...)
		off := mustRun(t, append([]string{args[0], "--data-dir", dir}, args[1:]...)...)
		if on != off {
			t.Errorf("%v online\n%s\noffline\n%s", args, on, off)
		}
	}
	out := mustRun(t, "versions", srv, "evo/p")
	for _, want := range []string{"1.0.0 (1 file, 2 rows), 1.1.0 (1 file, 1 row)", "schema policy: additive"} {
		if !strings.Contains(out, want) {
			t.Errorf("versions lacks %q:\n%s", want, out)
		}
	}
	if out := mustRun(t, "schema", srv, "evo/p"); !strings.Contains(out, "amount") {
		t.Errorf("schema:\n%s", out)
	}
	if out := mustRun(t, "schema-policy", srv, "evo/p", "none"); out != "evo/p: schema policy none\n" {
		t.Errorf("schema-policy: %q", out)
	}
	if out := mustRun(t, "schema-policy", "--data-dir", dir, "evo/p", "additive"); out != "evo/p: schema policy additive\n" {
		t.Errorf("schema-policy offline: %q", out)
	}
	if _, _, err := run(t, "schema-policy", srv, "evo/p", "strict"); err == nil || !strings.Contains(err.Error(), "schema_policy") {
		t.Errorf("schema-policy strict: %v", err)
	}
}
