// Package reliability holds Quiver's reliability suite (issue 9): load on
// several servers sharing one data dir, faults (SIGKILL of servers mid-put,
// a full disk, clients vanishing mid-stream, stale locks), and a catalogue of
// hostile requests, all against the real `quiver serve` binary with Go and
// pyarrow Flight clients, and a model-based randomized test (seeded
// operation sequences under kills, checked for linearizability per profile
// with porcupine and against named invariants; model_*_test.go). The tests live in *_test.go files; they run only
// when QUIVER_STRESS_SCALE is set ("ci" for the small setting, "full" for the
// documented one). See docs/reliability.md.
package reliability
