package reliability

// The checker's own tests: hand-written histories that must pass and must
// fail, through the same conversion (resolution of unknown outcomes,
// skipped operations) the real run uses. They need no server.

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
)

const tp = "p" // the profile of the hand-written histories

// hb builds a hand-written history of profile tp.
type hb struct {
	h *history
}

func newHB() *hb {
	h := newHistory()
	h.clockSlack = 0 // the hand-written histories' times are not nanoseconds
	return &hb{h: h}
}

// putRows registers put pid with n rows of family fam.
func (b *hb) putRows(pid int64, fam, n int) {
	if b.h.puts[pid] != nil {
		return
	}
	p := &putInfo{PID: pid, Path: tp, Fam: fam}
	for i := 0; i < n; i++ {
		p.Rows = append(p.Rows, fmt.Sprintf("pid=%d;rn=%d;", pid, i))
		p.Regions = append(p.Regions, regionValues[i%3])
	}
	b.h.addPut(p)
}

func (b *hb) add(o *mop) *hb {
	if o.Path == "" {
		o.Path = tp
	}
	if o.Ver == 0 && o.St != stOK && !o.isPut() {
		o.Ver = -1
	}
	if o.isPut() {
		b.putRows(o.PID, o.Fam, 2)
	}
	b.h.addOp(o)
	if o.St == stOK && o.IDs != nil {
		for _, id := range o.IDs {
			b.h.observe(id, observation{op: o.ID, ver: o.Ver, ret: o.Ret})
		}
	}
	return b
}

// Operations: call and ret in arbitrary time units.
func opW(pid int64, call, ret int64, v int) *mop {
	return &mop{genOp: genOp{Kind: opWrite}, PID: pid, Call: call, Ret: ret, St: stOK, Ver: v, ResRows: 2}
}
func opA(pid int64, call, ret int64, v int) *mop {
	return &mop{genOp: genOp{Kind: opAppend}, PID: pid, Call: call, Ret: ret, St: stOK, Ver: v, ResRows: 2}
}
func withFam(o *mop, fam int) *mop { o.Fam = fam; return o }
func withPath(o *mop, p string) *mop {
	o.Path = p
	return o
}
func withBurst(o *mop, n int) *mop { o.Burst = n; return o }
func withSeq(o *mop, n int64) *mop { o.Seq = n; return o }
func opRej(kind string, pid int64, fam int, call, ret int64) *mop {
	return &mop{genOp: genOp{Kind: kind, Fam: fam}, PID: pid, Call: call, Ret: ret, St: stRejected, Code: "InvalidArgument", Ver: -1}
}
func opUnknown(kind string, pid int64, call int64) *mop {
	return &mop{genOp: genOp{Kind: kind}, PID: pid, Call: call, Ret: -1, St: stUnknown, Ver: -1}
}
func opDupOf(kind string, pid int64, call, ret int64, v int) *mop {
	return &mop{genOp: genOp{Kind: opDup, Mode: kind}, PID: pid, Call: call, Ret: ret, St: stOK, Ver: v, Replayed: true}
}

// opR reads the latest through GetFlightInfo (v -1: a read that does not
// say which version, like a bare ticket).
func opR(call, ret int64, v int, ids ...int64) *mop {
	read := "info"
	if v < 0 {
		read = "json"
	}
	return &mop{genOp: genOp{Kind: opRead, Read: read}, Call: call, Ret: ret, St: stOK, Ver: v, IDs: append([]int64{}, ids...)}
}
func opRNotFound(call, ret int64) *mop {
	return &mop{genOp: genOp{Kind: opRead, Read: "json"}, Call: call, Ret: ret, St: stNotFound, Ver: -1}
}
func opRV(call, ret int64, v int, ids ...int64) *mop {
	return &mop{genOp: genOp{Kind: opReadV, Read: "json"}, Call: call, Ret: ret, St: stOK, Ver: v, ReadVer: v, IDs: append([]int64{}, ids...)}
}
func opRVNotFound(call, ret int64, v int) *mop {
	return &mop{genOp: genOp{Kind: opReadV, Read: "json"}, Call: call, Ret: ret, St: stNotFound, Ver: -1, ReadVer: v}
}
func opRPart(call, ret int64, region *string, ids ...int64) *mop {
	return &mop{genOp: genOp{Kind: opRead, Read: "part"}, Call: call, Ret: ret, St: stOK, Ver: -1, Filter: region, IDs: append([]int64{}, ids...)}
}
func opL(call, ret int64, v int, rows int64) *mop {
	return &mop{genOp: genOp{Kind: opLatest}, Call: call, Ret: ret, St: stOK, Ver: v, ResRows: rows}
}
func opC(call, ret int64, v int) *mop {
	return &mop{genOp: genOp{Kind: opCompact}, Call: call, Ret: ret, St: stOK, Ver: v}
}
func opRT(call, ret int64, keep int, removed ...int) *mop {
	return &mop{genOp: genOp{Kind: opRetain, Keep: keep}, Call: call, Ret: ret, St: stOK, Ver: -1, Removed: append([]int{}, removed...)}
}

func partW(pid int64, call, ret int64, v int) *mop {
	o := opW(pid, call, ret, v)
	o.Fam, o.PartBy = famPart, []string{"region"}
	return o
}

// TestModelCheckerHistories: porcupine with the model accepts the legal
// histories and rejects the illegal ones.
func TestModelCheckerHistories(t *testing.T) {
	eu := sp("eu")
	cases := []struct {
		name  string
		ops   []*mop
		final map[int][]int64
		legal bool
	}{
		// Legal.
		{"write, append, read", []*mop{opW(1, 0, 10, 0), opA(2, 20, 30, 0), opR(40, 50, 0, 1, 2)}, nil, true},
		{"a slower write with a lower version does not become latest",
			[]*mop{opW(1, 0, 100, 5), opW(2, 10, 20, 6), opR(30, 40, 6, 2), opR(110, 120, 6, 2), opRV(130, 140, 5, 1)}, nil, true},
		{"concurrent first appends converge", []*mop{opA(1, 0, 10, 0), opA(2, 0, 10, 0), opR(20, 30, 0, 1, 2)}, nil, true},
		{"an unknown append that took effect", []*mop{opW(1, 0, 5, 0), opUnknown(opAppend, 2, 6), opR(20, 30, 0, 1, 2)}, nil, true},
		{"an unknown append seen late, nothing earlier contradicts it",
			[]*mop{opW(1, 0, 5, 0), opUnknown(opAppend, 2, 6), opR(10, 15, 0, 1), opR(20, 30, 0, 1, 2)}, nil, true},
		{"an unknown append never seen", []*mop{opW(1, 0, 5, 0), opUnknown(opAppend, 2, 6), opR(20, 30, 0, 1)}, nil, true},
		{"an unknown write seen in a version read", []*mop{opW(1, 0, 5, 0), opUnknown(opWrite, 2, 6), opRV(20, 30, 1, 2), opR(40, 50, 1, 2)}, nil, true},
		{"a resend answers the first result", []*mop{opA(1, 0, 10, 0), opDupOf("append", 1, 20, 30, 0), opR(40, 50, 0, 1)}, nil, true},
		{"a resend of a write after a later write", []*mop{opW(1, 0, 10, 0), opW(2, 20, 30, 1), opDupOf("write", 1, 40, 50, 0), opR(60, 70, 1, 2)}, nil, true},
		{"a resend of an append into a compacted version", []*mop{opW(1, 0, 10, 0), opC(20, 30, 1), opA(2, 40, 50, 1), opDupOf("append", 2, 60, 70, 1), opR(80, 90, 1, 1, 2)}, nil, true},
		{"compaction copies the latest", []*mop{opW(1, 0, 10, 0), opA(2, 12, 18, 0), opC(20, 30, 1), opRV(40, 50, 1, 1, 2), opA(3, 60, 70, 1), opR(80, 90, 1, 1, 2, 3)}, nil, true},
		{"retention removes an old version", []*mop{opW(1, 0, 10, 0), opW(2, 20, 30, 1), opRT(40, 50, 1, 0), opRVNotFound(60, 70, 0), opR(80, 90, 1, 2)}, nil, true},
		{"an append refused for its schema", []*mop{opW(1, 0, 10, 0), opRej(opAppend, 2, 1, 20, 30), opR(40, 50, 0, 1)}, nil, true},
		{"not found, then created", []*mop{opRNotFound(0, 5), opA(1, 10, 20, 0), opR(30, 40, 0, 1)}, nil, true},
		{"an append concurrent with a write lands in the old version", []*mop{opW(1, 0, 10, 0), opW(2, 20, 40, 1), opA(3, 25, 35, 0), opR(50, 60, 1, 2), opRV(50, 60, 0, 1, 3)}, nil, true},
		{"list-versions rows", []*mop{opW(1, 0, 10, 0), opA(2, 20, 30, 0), opL(40, 50, 0, 4)}, nil, true},
		{"a partition-filtered read", []*mop{partW(1, 0, 10, 0), opRPart(20, 30, eu, 1), opRPart(20, 30, nil)}, nil, true}, // put 1's rows: eu, us
		{"an unknown compaction resolved from the end state",
			[]*mop{opW(1, 0, 10, 0), opUnknown(opCompact, 0, 20), opRV(40, 50, 1, 1)}, map[int][]int64{0: {1}, 1: {1}}, true},
		{"an unknown retention resolved from a later read", []*mop{opW(1, 0, 10, 0), opW(2, 11, 19, 1), opUnknown(opRetain, 0, 20), opRVNotFound(40, 50, 0), opR(60, 70, 1, 2)}, nil, true},
		{"an unknown retention resolved from the end state", []*mop{opW(1, 0, 10, 0), opW(2, 11, 19, 1), opUnknown(opRetain, 0, 20), opR(60, 70, 1, 2)}, map[int][]int64{1: {2}}, true},
		{"an unknown compaction seen by a read, later removed",
			[]*mop{opW(1, 0, 10, 0), opUnknown(opCompact, 0, 20), opRV(40, 50, 1, 1), opW(2, 60, 70, 2), opRT(80, 90, 1, 0, 1)}, map[int][]int64{2: {2}}, true},
		// Illegal.
		{"a version vanishes with no retention", []*mop{opW(1, 0, 10, 0), opW(2, 11, 19, 1), opRVNotFound(40, 50, 0), opR(60, 70, 1, 2)}, nil, false},
		{"an unknown retention cannot remove the latest", []*mop{opW(1, 0, 10, 0), opUnknown(opRetain, 0, 20), opRVNotFound(40, 50, 0)}, nil, false},
		{"first appends diverge", []*mop{opA(1, 0, 10, 0), opA(2, 0, 10, 1)}, nil, false},
		{"an append after a write lands in an older version", []*mop{opW(1, 0, 10, 0), opW(2, 20, 30, 1), opA(3, 40, 50, 0)}, nil, false},
		{"an acknowledged append is lost", []*mop{opA(1, 0, 10, 0), opA(2, 20, 30, 0), opR(40, 50, 0, 1)}, nil, false},
		{"the manifest moves backwards", []*mop{opW(1, 0, 10, 0), opW(2, 20, 30, 1), opR(40, 50, 0, 1)}, nil, false},
		{"a read returns a refused put", []*mop{opW(1, 0, 10, 0), opRej(opAppend, 2, 1, 20, 30), opR(40, 50, 0, 1, 2)}, nil, false},
		{"retention removes the latest", []*mop{opW(1, 0, 10, 0), opRT(20, 30, 1, 0)}, nil, false},
		{"retention removes one it had to keep", []*mop{opW(1, 0, 10, 0), opW(2, 11, 19, 1), opW(3, 20, 30, 2), opRT(40, 50, 2, 0, 1)}, nil, false},
		{"a resend of an append into a compacted version appends twice", []*mop{opW(1, 0, 10, 0), opC(20, 30, 1), opA(2, 40, 50, 1), opDupOf("append", 2, 60, 70, 1), opA(3, 75, 78, 1), opL(80, 90, 1, 8)}, nil, false},
		{"a resend writes twice", []*mop{opW(1, 0, 10, 0), opDupOf("write", 1, 20, 30, 1)}, nil, false},
		{"an append of another schema accepted", []*mop{opW(1, 0, 10, 0), withFam(opA(2, 20, 30, 0), 1)}, nil, false},
		{"an append of the same schema refused", []*mop{opW(1, 0, 10, 0), opRej(opAppend, 2, 0, 20, 30)}, nil, false},
		{"a first put refused on an uncontested profile", []*mop{opRej(opAppend, 1, 0, 0, 10)}, nil, false},
		// Compaction is atomic: an append that lands in the old version
		// while the compaction runs must be in the compacted version or
		// have been acknowledged in it.
		{"compaction misses an append that landed in the old version while it ran", []*mop{opW(1, 0, 10, 0), opA(2, 20, 40, 0), opC(21, 30, 1), opRV(50, 60, 1, 1), opRV(50, 60, 0, 1, 2)}, nil, false},
		{"compaction loses an append acknowledged before it", []*mop{opW(1, 0, 10, 0), opA(2, 20, 30, 0), opC(40, 50, 1), opRV(60, 70, 1, 1)}, nil, false},
		{"a version nobody wrote", []*mop{opW(1, 0, 10, 0), opRV(20, 30, 3, 1)}, nil, false},
		{"an unknown write seen, then unseen", []*mop{opW(1, 0, 5, 0), opUnknown(opWrite, 2, 6), opR(20, 30, 1, 2), opR(40, 50, 0, 1)}, nil, false},
		{"list-versions rows wrong", []*mop{opW(1, 0, 10, 0), opA(2, 20, 30, 0), opL(40, 50, 0, 3)}, nil, false},
		{"a partition-filtered read returns a put without rows there", []*mop{partW(1, 0, 10, 0), opRPart(20, 30, sp("ü"), 1)}, nil, false},
		{"a read after a version was removed finds it", []*mop{opW(1, 0, 10, 0), opW(2, 20, 30, 1), opRT(40, 50, 1, 0), opRV(60, 70, 0, 1)}, nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newHB()
			for _, o := range tc.ops {
				b.add(o)
			}
			if tc.final != nil {
				b.h.final[tp] = tc.final
			}
			b.h.resolve()
			lin := b.h.checkLinearizable(10 * time.Second)
			if len(lin) != 1 {
				t.Fatalf("%d profiles checked", len(lin))
			}
			got := lin[0].Result == porcupine.Ok
			if got != tc.legal {
				t.Errorf("linearizable = %v (%s), want %v\n%s", got, lin[0].Result, tc.legal, b.h.report(lin, 10))
			}
			if !tc.legal && len(lin[0].Stuck) == 0 {
				t.Errorf("an illegal history names no stuck operation")
			}
		})
	}
}

// TestModelCheckerDirect: each direct check fires on its violation and
// stays quiet on a clean history.
func TestModelCheckerDirect(t *testing.T) {
	cases := []struct {
		name  string
		inv   string // "" : no finding at all
		ops   []*mop
		final map[string]map[int][]int64
	}{
		{"clean", "", []*mop{opW(1, 0, 10, 0), opA(2, 20, 30, 0), opR(40, 50, 0, 1, 2)}, map[string]map[int][]int64{tp: {0: {1, 2}}}},
		{"clean with a burst", "", []*mop{withBurst(opA(1, 0, 10, 0), 1), withBurst(opA(2, 0, 10, 0), 1)}, nil},
		{"bad input accepted", "bad-input-accepted", []*mop{{genOp: genOp{Kind: opBad, Bad: "null-top", Mode: "append"}, PID: 1, Call: 0, Ret: 10, St: stOK, Ver: 0, ResRows: 2}}, nil},
		{"bad input refused with the wrong code", "bad-input-wrong-code", []*mop{{genOp: genOp{Kind: opBad, Bad: "null-top", Mode: "append"}, PID: 1, Call: 0, Ret: 10, St: stRejected, Code: "FailedPrecondition", Ver: -1}}, nil},
		{"a resend answers another result", "retry-different-result", []*mop{opA(1, 0, 10, 0), opDupOf("append", 1, 20, 30, 1)}, nil},
		{"a write after an observed version gets a lower one", "write-version-order", []*mop{opW(1, 0, 10, 3), opW(2, 20, 30, 2)}, nil},
		{"an append started after a write lands below it", "append-after-write", []*mop{opW(1, 0, 10, 1), opA(2, 20, 30, 0)}, nil},
		{"an append acknowledged after a write lands below it", "append-acked-after-write", []*mop{opW(1, 0, 10, 1), opA(2, 5, 30, 0)}, nil},
		{"an append acknowledged after a compaction lands below it", "append-acked-after-compaction", []*mop{opW(1, 0, 10, 0), opC(20, 30, 1), opA(2, 25, 40, 0)}, nil},
		{"first appends diverge beside a write", "first-appends-diverged", []*mop{opA(1, 0, 10, 0), opA(2, 0, 10, 1), opW(3, 0, 10, 2)}, nil},
		{"first appends, one in a concurrent write's version", "", []*mop{opA(1, 0, 10, 0), opA(2, 0, 30, 1), opW(3, 0, 20, 1)}, nil},
		{"first appends diverge", "first-appends-diverged", []*mop{withBurst(opA(1, 0, 10, 0), 1), withBurst(opA(2, 0, 10, 1), 1)}, nil},
		{"a refused put visible", "rejected-put-visible", []*mop{opW(1, 0, 10, 0), opRej(opAppend, 2, 1, 20, 30), opR(40, 50, 0, 1, 2)}, nil},
		{"an abandoned put visible", "cancelled-put-visible", []*mop{opW(1, 0, 10, 0), {genOp: genOp{Kind: opCancel}, PID: 2, Call: 20, Ret: 30, St: stRejected, Code: "Canceled", Ver: -1}, opR(40, 50, 0, 1, 2)}, nil},
		{"an acknowledged put missing at the end", "acked-put-missing", []*mop{opW(1, 0, 10, 0), opA(2, 20, 30, 0)}, map[string]map[int][]int64{tp: {0: {1}}}},
		{"a put in a version it was not put to", "put-in-wrong-version", []*mop{opW(1, 0, 10, 0), opW(2, 20, 30, 1)}, map[string]map[int][]int64{tp: {0: {1}, 1: {1, 2}}}},
		{"nested profiles both exist", "nested-profiles-both-exist", []*mop{withPath(opA(1, 0, 10, 0), "a"), withPath(opA(2, 20, 30, 0), "a/b")}, nil},
		{"seq numbers out of real-time order", "seq-order", []*mop{withSeq(opW(1, 0, 10, 0), 2), withSeq(opA(2, 20, 30, 0), 1)}, nil},
		{"a seq number answered twice", "seq-reused", []*mop{withSeq(opW(1, 0, 10, 0), 1), withSeq(opA(2, 0, 30, 0), 1)}, nil},
		{"seq numbers in order, a resend answers the first", "", []*mop{withSeq(opW(1, 0, 10, 0), 1), withSeq(opA(2, 20, 30, 0), 2), withSeq(opDupOf("append", 2, 40, 50, 0), 2)}, nil},
		{"a readable version above the latest", "latest-below-readable-version", []*mop{opW(1, 0, 10, 0), opUnknown(opWrite, 2, 11), opRV(20, 30, 1, 2), opL(40, 50, 0, 2), opRV(60, 70, 1, 2)}, nil},
		{"a read fails with no retention running", "read-failed", []*mop{opW(1, 0, 10, 0), {genOp: genOp{Kind: opRead, Read: "json"}, Call: 20, Ret: 30, St: stError, Code: "DataLoss", Ver: -1}}, nil},
		{"an Internal error", "unexpected-error", []*mop{{genOp: genOp{Kind: opAppend}, PID: 1, Call: 0, Ret: -1, St: stUnknown, Ver: -1, Attempts: []mattempt{{Code: "Internal"}}}}, nil},
		{"a put result with the wrong row count", "bad-put-result", []*mop{{genOp: genOp{Kind: opAppend}, PID: 1, Call: 0, Ret: 10, St: stOK, Ver: 0, ResRows: 3}}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newHB()
			for _, o := range tc.ops {
				b.add(o)
			}
			if tc.final != nil {
				b.h.final = tc.final
			}
			b.h.checkHistory(context.Background(), 10*time.Second)
			all := b.h.f.all()
			if tc.inv == "" {
				if len(all) > 0 {
					t.Errorf("findings on a clean history:%s", b.h.report(nil, 10))
				}
				return
			}
			if b.h.f.count(tc.inv) == 0 {
				t.Errorf("no %s finding; got:%s", tc.inv, b.h.report(nil, 10))
			}
		})
	}
}

// TestModelCheckerRows: the per-read row checks.
func TestModelCheckerRows(t *testing.T) {
	b := newHB()
	b.putRows(1, 0, 3)
	row := func(pid int64, rn int32, canon string) rowObs {
		if canon == "" {
			canon = fmt.Sprintf("pid=%d;rn=%d;", pid, rn)
		}
		return rowObs{pid: pid, rn: rn, canon: canon}
	}
	cases := []struct {
		name string
		rows []rowObs
		inv  string
	}{
		{"whole", []rowObs{row(1, 0, ""), row(1, 1, ""), row(1, 2, "")}, ""},
		{"partial", []rowObs{row(1, 0, ""), row(1, 2, "")}, "partial-put-visible"},
		{"duplicate", []rowObs{row(1, 0, ""), row(1, 1, ""), row(1, 2, ""), row(1, 2, "")}, "duplicate-rows"},
		{"value changed", []rowObs{row(1, 0, ""), row(1, 1, "pid=1;rn=1;x=0;"), row(1, 2, "")}, "value-changed"},
		{"phantom", []rowObs{row(1, 0, ""), row(1, 1, ""), row(1, 2, ""), row(9, 0, "")}, "phantom-rows"},
		{"null pid", []rowObs{row(1, 0, ""), row(1, 1, ""), row(1, 2, ""), {null: true}}, "phantom-rows"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b.h.f = findings{}
			o := &mop{genOp: genOp{Kind: opRead, Path: tp}}
			ids := b.h.checkRows(o, tc.rows, true, nil, false)
			if len(ids) == 0 || ids[0] != 1 {
				t.Errorf("ids %v", ids)
			}
			all := b.h.f.all()
			switch {
			case tc.inv == "" && len(all) > 0:
				t.Errorf("findings: %+v", all)
			case tc.inv != "" && b.h.f.count(tc.inv) == 0:
				t.Errorf("no %s: %+v", tc.inv, all)
			}
		})
	}
}

// TestModelCanonRoundTrip: canonical rows of a built put survive an IPC
// round trip and a reordering of the columns unchanged, differ for another
// seed, and the generator is deterministic in its seed.
func TestModelCanonRoundTrip(t *testing.T) {
	for fam := range families {
		a := buildPut(dataSpec{pid: 7, fam: fam, rows: 30, batches: 3, seed: 42})
		a2 := buildPut(dataSpec{pid: 7, fam: fam, rows: 30, batches: 3, seed: 42})
		c := buildPut(dataSpec{pid: 7, fam: fam, rows: 30, batches: 3, seed: 43})
		name := families[fam].name
		if strings.Join(a.rows, "\n") != strings.Join(a2.rows, "\n") {
			t.Errorf("%s: the same seed gives other rows", name)
		}
		if strings.Join(a.rows, "\n") == strings.Join(c.rows, "\n") {
			t.Errorf("%s: another seed gives the same rows", name)
		}
		var buf bytes.Buffer
		w := ipc.NewWriter(&buf, ipc.WithSchema(a.schema))
		for _, rec := range a.batches {
			if err := w.Write(rec); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		rdr, err := ipc.NewReader(&buf)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for rdr.Next() {
			rec := rdr.RecordBatch()
			rev := reversed(rec.Schema())
			cols := make([]arrow.Array, rec.NumCols())
			for i := range cols {
				cols[len(cols)-1-i] = rec.Column(i)
			}
			rrec := array.NewRecordBatch(rev, cols, rec.NumRows())
			for i := 0; i < int(rec.NumRows()); i++ {
				got = append(got, canonRow(rrec, i))
			}
			rrec.Release()
		}
		rdr.Release()
		if strings.Join(got, "\n") != strings.Join(a.rows, "\n") {
			t.Errorf("%s: the round trip changes the canonical rows", name)
		}
		a.release()
		a2.release()
		c.release()
	}
	bad := buildPut(dataSpec{pid: 1, fam: 0, rows: 5, batches: 1, seed: 1, bad: "null-top"})
	defer bad.release()
	if !strings.Contains(strings.Join(bad.rows, ""), "y=null") {
		t.Errorf("null-top put has no null in y")
	}
}

// TestModelNestedPair: the nesting relation of profile names.
func TestModelNestedPair(t *testing.T) {
	for _, tc := range []struct {
		p, q string
		want bool
	}{{"a", "a/b", true}, {"a/b", "a", true}, {"a", "a", false}, {"a", "ab", false}, {"a/b", "a/c", false}, {"a", "a/b/c", true}} {
		if got := nestedPair(tc.p, tc.q); got != tc.want {
			t.Errorf("nestedPair(%q, %q) = %v", tc.p, tc.q, got)
		}
	}
}

// TestModelCheckerEmptyRegion: a put holding the region "" may be refused
// when partitioned by region, and only then.
func TestModelCheckerEmptyRegion(t *testing.T) {
	for _, tc := range []struct {
		name  string
		empty bool
		legal bool
	}{{"refused for an empty region", true, true}, {"refused without one", false, false}} {
		t.Run(tc.name, func(t *testing.T) {
			b := newHB()
			b.add(partW(1, 0, 10, 0))
			b.putRows(2, famPart, 2)
			b.h.puts[2].EmptyRegion = tc.empty
			o := opRej(opWrite, 2, famPart, 20, 30)
			o.PartBy = []string{"region"}
			b.add(o)
			b.putRows(3, famPart, 2)
			b.h.puts[3].EmptyRegion = tc.empty
			b.add(opRej(opAppend, 3, famPart, 40, 50))
			lin := b.h.checkLinearizable(10 * time.Second)
			if got := lin[0].Result == porcupine.Ok; got != tc.legal {
				t.Errorf("linearizable = %v, want %v\n%s", got, tc.legal, b.h.report(lin, 10))
			}
		})
	}
}

// TestModelKeyPool: every key of the pool has the kind reservedWhy gives
// it, and reservedWhy follows the rules at their edges.
func TestModelKeyPool(t *testing.T) {
	for _, k := range modelKeys {
		if got := keyKindOf(k.path); got != k.kind {
			t.Errorf("%q (%s): pool says %s, reservedWhy %q", trim(k.path, 40), k.why, k.kind, reservedWhy(k.path))
		}
	}
	for _, tc := range []struct {
		p        string
		reserved bool
	}{
		{"v", false}, {"v1", true}, {"V12", true}, {"v1a", false}, {"av1", false}, {"v-1", false},
		{"0.parquet", true}, {"0.Parquet", true}, {"1.csv", true}, {"a.parquet", false}, {"0.parquet.tmp", false}, {"1.CSV.x", false},
		{"manifest.json", true}, {"MANIFEST.json", true}, {"manifest.json.write_lock", true}, {"manifest.json.tmp", false}, {"manifest", false},
		{".x", true}, {"x.", false}, {"a=b", true}, {`a\b`, true}, {"a\x01", true}, {"a\x7f", true}, {"é", false},
		{strings.Repeat("k", 255), false}, {strings.Repeat("k", 256), true}, {"", true}, {"a//b", true}, {"a/./b", true}, {"..", true},
		{strings.Repeat("k/", 31) + "k", false}, {strings.Repeat("k/", 32) + "k", true},
		{strings.Repeat("k", 200) + "/" + strings.Repeat("k", 200) + "/" + strings.Repeat("k", 200) + "/" + strings.Repeat("k", 200) + "/" + strings.Repeat("k", 220), false}, // 1024
		{strings.Repeat("k", 200) + "/" + strings.Repeat("k", 200) + "/" + strings.Repeat("k", 200) + "/" + strings.Repeat("k", 200) + "/" + strings.Repeat("k", 221), true},  // 1025
	} {
		if got := reservedWhy(tc.p) != ""; got != tc.reserved {
			t.Errorf("reservedWhy(%q) = %q; want reserved=%v", trim(tc.p, 40), reservedWhy(tc.p), tc.reserved)
		}
	}
}

func withFrom(o *mop, v int) *mop { o.From = &v; return o }
func withRows(o *mop, n int64) *mop {
	o.ResRows = n
	return o
}

// TestModelCheckerResolve: unknown compactions and retentions are given
// the effect the commit records (or, without them, the reads) prove, and
// the model holds a compaction to its source and row count.
func TestModelCheckerResolve(t *testing.T) {
	rec := func(seq int64, v int, mode, rid string, from int, at int64) linRec {
		return linRec{Seq: seq, Version: v, Mode: mode, RequestID: rid, From: from, At: at}
	}
	// Put 1 written to v0, an unknown compaction into v1, an append into v1.
	compactThenAppend := []*mop{opW(1, 0, 10, 0), opUnknown(opCompact, 0, 20), opA(2, 30, 40, 1), opRV(50, 60, 1, 1, 2), opR(70, 80, 1, 1, 2)}
	// Two unknown retentions; the first removed v0 (a read finds it gone
	// before the second started).
	twoRetentions := []*mop{opW(1, 0, 5, 0), opW(2, 6, 9, 1), opUnknown(opRetain, 0, 20), opRVNotFound(30, 35, 0), opW(3, 36, 38, 2), opUnknown(opRetain, 0, 40), opR(50, 60, 2, 3)}
	cases := []struct {
		name  string
		ops   []*mop
		final map[int][]int64
		recs  []linRec // nil: the run fetched no records
		legal bool
		inv   string // a finding that must be made ("" none)
	}{
		{"an unknown compaction whose version later appends went to, by reads", compactThenAppend, map[int][]int64{0: {1}, 1: {1, 2}}, nil, true, ""},
		{"an unknown compaction whose version later appends went to, by records", compactThenAppend, map[int][]int64{0: {1}, 1: {1, 2}},
			[]linRec{rec(1, 0, "write", "m-1", -1, 5), rec(2, 1, "write", "", 0, 25), rec(3, 1, "append", "m-2", -1, 35)}, true, ""},
		{"a compaction record nobody asked for", []*mop{opW(1, 0, 10, 0), opR(50, 60, 0, 1)}, map[int][]int64{0: {1}},
			[]linRec{rec(1, 0, "write", "m-1", -1, 5), rec(2, 1, "write", "", 0, 25)}, true, "compaction-unaccounted"},
		{"an unknown compaction that committed nothing, by records", []*mop{opW(1, 0, 10, 0), opUnknown(opCompact, 0, 20), opR(70, 80, 0, 1)}, map[int][]int64{0: {1}},
			[]linRec{rec(1, 0, "write", "m-1", -1, 5)}, true, ""},
		{"two unknown retentions, the first removed v0, by reads", twoRetentions, map[int][]int64{1: {2}, 2: {3}}, nil, true, ""},
		{"two unknown retentions, the first removed v0, by records", twoRetentions, map[int][]int64{1: {2}, 2: {3}},
			[]linRec{rec(1, 0, "write", "m-1", -1, 2), rec(2, 1, "write", "m-2", -1, 8), rec(3, 0, "retire", "", -1, 25), rec(4, 2, "write", "m-3", -1, 37)}, true, ""},
		{"retire records nobody asked for", []*mop{opW(1, 0, 5, 0), opW(2, 6, 9, 1), opR(50, 60, 1, 2)}, map[int][]int64{1: {2}},
			[]linRec{rec(1, 0, "write", "m-1", -1, 2), rec(2, 1, "write", "m-2", -1, 8), rec(3, 0, "retire", "", -1, 25)}, true, "retire-unaccounted"},
		{"a compaction of the source it names", []*mop{opW(1, 0, 10, 0), withRows(withFrom(opC(20, 30, 1), 0), 2)}, nil, nil, true, ""},
		{"a compaction of a source that is not the latest", []*mop{opW(1, 0, 10, 0), opW(2, 11, 19, 1), withFrom(opC(20, 30, 2), 0)}, nil, nil, false, ""},
		{"a compaction with the wrong row count", []*mop{opW(1, 0, 10, 0), opA(2, 11, 19, 0), withRows(withFrom(opC(20, 30, 1), 0), 2)}, nil, nil, false, ""},
		{"an append answered after an overlapping write, committed first", []*mop{withSeq(opW(1, 0, 10, 0), 1), withSeq(opW(2, 20, 30, 1), 3), withSeq(opA(3, 21, 35, 0), 2)}, nil, nil, true, ""},
		{"an append committed after an overlapping write into the old version", []*mop{withSeq(opW(1, 0, 10, 0), 1), withSeq(opW(2, 20, 30, 1), 2), withSeq(opA(3, 21, 35, 0), 3)}, nil, nil, true, "append-committed-after-write"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newHB()
			for _, o := range tc.ops {
				c := *o // the tables share ops
				b.add(&c)
			}
			if tc.final != nil {
				b.h.final[tp] = tc.final
				b.h.finalAt = 1000
			}
			if tc.recs != nil {
				b.h.records[tp] = tc.recs
			}
			lin := b.h.checkHistory(context.Background(), 10*time.Second)
			if got := lin[0].Result == porcupine.Ok; got != tc.legal {
				t.Errorf("linearizable = %v, want %v\n%s", got, tc.legal, b.h.report(lin, 10))
			}
			for _, x := range b.h.f.all() {
				if x.Inv != tc.inv && x.Inv != "linearizability" {
					t.Errorf("unexpected finding %s: %s", x.Inv, x.Detail)
				}
			}
			if tc.inv != "" && b.h.f.count(tc.inv) == 0 {
				t.Errorf("no %s finding:%s", tc.inv, b.h.report(lin, 10))
			}
		})
	}
}
