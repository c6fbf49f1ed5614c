package reliability

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// The model-based randomized test (the project's trust issue): a seeded
// generator of operation sequences — appends, writes, reads, compaction,
// retention, sweeps, refused bad input (reserved and nested keys, nulls in
// non-nullable columns, hive's null partition name, crafted offsets),
// abandoned puts, resends of a request id, concurrent first appends —
// runs from several clients against several `quiver serve` processes on
// one data dir while servers are SIGKILLed and restarted. Every operation
// is recorded with its start and end; afterwards each profile's history
// is checked for linearizability against a small sequential model
// (porcupine, see step in model_check_test.go) and a list of invariants
// is checked directly, each by name. The seed is printed at the start and
// on failure (QUIVER_MODEL_SEED replays the operations).
//
// The contract checked (docs/architecture.md, DESIGN.md §2–4):
//   - a write creates a version holding exactly its rows; the latest is
//     the highest committed version (the manifest never moves backwards);
//   - an append lands in the latest version at its commit; an append to a
//     missing profile creates it, and concurrent first appends converge on
//     one version;
//   - a read returns exactly the rows of one version, every put whole or
//     not at all, every value as put;
//   - a put whose outcome is unknown takes effect atomically or not at all;
//     a resend with the same request_id answers the first result and never
//     writes twice;
//   - compaction is a write of the latest's rows into a new version;
//     retention never removes the latest;
//   - bad input is refused with InvalidArgument (nested profiles:
//     InvalidArgument or FailedPrecondition) and changes nothing readable;
//   - after each phase: verify is clean but for what kills leave (and clean
//     after a sweep), ListFlights lists exactly the profiles that exist.

// modelShort is the CI size: 60–90 s on two busy cores (about 12,000
// operations, 39 kills).
var modelShort = genConfig{Servers: 2, Clients: 4, Phases: 14, OpsPerPhase: 700, KillsPerPhase: 3, MaxRows: 20, CheckTimeout: 20 * time.Second}

// modelLong is the stress size (make stress).
var modelLong = genConfig{Servers: 3, Clients: 8, Phases: 20, OpsPerPhase: 500, KillsPerPhase: 4, MaxRows: 40, CheckTimeout: 2 * time.Minute}

// TestModelShort runs the model test at CI size (QUIVER_STRESS_SCALE set,
// as make test does). The QUIVER_MODEL_* variables of TestModelLong
// override its size too.
func TestModelShort(t *testing.T) {
	requireStress(t)
	runModel(t, modelSeed(), sized(modelShort))
}

// sized applies the QUIVER_MODEL_* overrides to cfg.
func sized(cfg genConfig) genConfig {
	cfg.Phases = envInt("QUIVER_MODEL_PHASES", cfg.Phases)
	cfg.OpsPerPhase = envInt("QUIVER_MODEL_OPS", cfg.OpsPerPhase)
	cfg.Clients = envInt("QUIVER_MODEL_CLIENTS", cfg.Clients)
	cfg.Servers = envInt("QUIVER_MODEL_SERVERS", cfg.Servers)
	cfg.KillsPerPhase = envInt("QUIVER_MODEL_KILLS", cfg.KillsPerPhase)
	return cfg
}

// TestModelLong runs the model test at stress size: QUIVER_STRESS=1 or
// QUIVER_STRESS_SCALE=full. QUIVER_MODEL_PHASES, QUIVER_MODEL_OPS,
// QUIVER_MODEL_CLIENTS, QUIVER_MODEL_SERVERS and QUIVER_MODEL_KILLS
// override its size.
func TestModelLong(t *testing.T) {
	if os.Getenv("QUIVER_STRESS") != "1" && sc.Name != "full" {
		t.Skip("QUIVER_STRESS=1 or QUIVER_STRESS_SCALE=full runs the long model test")
	}
	ensureBinary(t)
	runModel(t, modelSeed(), sized(modelLong))
}

var buildMu sync.Mutex

// ensureBinary builds quiver when TestMain did not (QUIVER_STRESS=1
// without QUIVER_STRESS_SCALE) and removes it when t ends.
func ensureBinary(t *testing.T) {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if binary != "" {
		return
	}
	dir, err := os.MkdirTemp("", "quiver-model-bin-")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "quiver")
	cmd := exec.Command("go", "build", "-o", out, "github.com/quiverdb/quiver/cmd/quiver")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		os.RemoveAll(dir)
		t.Fatalf("build quiver: %v", err)
	}
	binary = out
	t.Cleanup(func() {
		buildMu.Lock()
		defer buildMu.Unlock()
		binary = ""
		os.RemoveAll(dir)
	})
}

// TestModelRecheck runs the checker again on a history a failed run left
// (QUIVER_MODEL_RECHECK=…/history.json): no server, the same report.
func TestModelRecheck(t *testing.T) {
	file := os.Getenv("QUIVER_MODEL_RECHECK")
	if file == "" {
		t.Skip("QUIVER_MODEL_RECHECK=<history.json> checks a saved history again")
	}
	h, sh, err := loadHistory(file)
	if err != nil {
		t.Fatal(err)
	}
	lin := h.checkHistory(context.Background(), sh.Config.CheckTimeout)
	if fs := h.f.all(); len(fs) > 0 {
		t.Errorf("%d broken invariants (seed %d)%s", len(fs), sh.Seed, h.report(lin, 4))
	}
}
