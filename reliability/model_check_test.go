package reliability

// The checker of the model-based test: the history of client operations,
// the sequential model of one profile that porcupine checks the history
// against (linearizability, per profile), and the direct invariant checks
// that name what broke more plainly than a failed linearization can.

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// outStatus is what an operation's outcome means to the model.
type outStatus int

const (
	stOK       outStatus = iota
	stRejected           // InvalidArgument, FailedPrecondition, …: refused, no effect
	stNotFound           // NotFound
	stError              // any other definite error (DataLoss, Internal on a read)
	stUnknown            // the outcome is unknown: killed server, timeout, cancel
)

func (s outStatus) String() string {
	return [...]string{"ok", "rejected", "notfound", "error", "unknown"}[s]
}

// MarshalText makes statuses readable in the history dump.
func (s outStatus) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a status of a saved history back.
func (s *outStatus) UnmarshalText(b []byte) error {
	for st := stOK; st <= stUnknown; st++ {
		if st.String() == string(b) {
			*s = st
			return nil
		}
	}
	return fmt.Errorf("status %q", b)
}

// mattempt is one try of an operation (puts are retried with the same
// request_id after an unknown outcome).
type mattempt struct {
	Server int    `json:"server"`
	Start  int64  `json:"start_ns"`
	End    int64  `json:"end_ns"`
	Code   string `json:"code"`
	Err    string `json:"err,omitempty"`
}

// mop is one client operation of the history: its input (the generated
// op), its interval and its outcome.
type mop struct {
	ID     int `json:"id"`
	Client int `json:"client"`
	Phase  int `json:"phase"`
	genOp
	PID      int64      `json:"pid,omitempty"`
	Call     int64      `json:"call_ns"`
	Ret      int64      `json:"ret_ns"` // -1: outcome unknown
	Attempts []mattempt `json:"attempts,omitempty"`
	St       outStatus  `json:"status"`
	Code     string     `json:"code"`
	Err      string     `json:"err,omitempty"`
	Ver      int        `json:"ver"` // result version (puts, info reads, compact, latest); -1 unknown
	Index    int        `json:"index,omitempty"`
	Seq      int64      `json:"seq,omitempty"` // the commit record's number, when the result carries one
	ResMode  string     `json:"result_mode,omitempty"`
	Replayed bool       `json:"replayed,omitempty"`
	IDs      []int64    `json:"ids,omitempty"`         // reads: the puts whose rows were read, sorted
	ResRows  int64      `json:"result_rows,omitempty"` // puts: the result's rows; latest: the latest version's rows
	Removed  []int      `json:"removed,omitempty"`
	ReadVer  int        `json:"read_ver,omitempty"` // readv: the version asked for
	From     *int       `json:"from,omitempty"`     // compact: the version it says it compacted (compacted_from)
	Filter   *string    `json:"filter,omitempty"`   // part reads: the region asked for
	Note     string     `json:"note,omitempty"`

	// Set by resolve for puts whose outcome was unknown.
	resolved   bool
	resolvedAt int64
}

func (o *mop) isPut() bool {
	return o.Kind == opAppend || o.Kind == opWrite || o.Kind == opDup || o.Kind == opBad
}

// putMode is the mode a put op ran with.
func (o *mop) putMode() string {
	switch o.Kind {
	case opWrite:
		return "write"
	case opBad, opDup:
		return o.genOp.Mode
	}
	return "append"
}

func (o *mop) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d c%d %s %q", o.ID, o.Client, o.Kind, trim(o.Path, 40))
	if o.PID != 0 {
		fmt.Fprintf(&b, " pid=%d", o.PID)
	}
	if o.isPut() || o.Kind == opCancel {
		fmt.Fprintf(&b, " %s fam=%s rows=%d", o.putMode(), families[o.Fam].name, o.genOp.Rows)
		if len(o.PartBy) > 0 {
			fmt.Fprintf(&b, " partition_by=%v", o.PartBy)
		}
		if o.Bad != "" {
			fmt.Fprintf(&b, " bad=%s", o.Bad)
		}
	}
	if o.Kind == opReadV {
		fmt.Fprintf(&b, " v%d", o.ReadVer)
	}
	if o.Kind == opBadKey {
		fmt.Fprintf(&b, " call=%s", o.Mode)
	}
	if o.Read != "" {
		fmt.Fprintf(&b, " via=%s", o.Read)
	}
	if o.Filter != nil {
		fmt.Fprintf(&b, " region=%q", *o.Filter)
	}
	if o.Burst > 0 {
		fmt.Fprintf(&b, " burst=%d", o.Burst)
	}
	fmt.Fprintf(&b, " → %s", o.St)
	if o.Code != "" && o.Code != "OK" {
		fmt.Fprintf(&b, "(%s)", o.Code)
	}
	if o.Ver >= 0 && (o.St == stOK || o.resolved) {
		fmt.Fprintf(&b, " v%d", o.Ver)
	}
	if o.isPut() && o.St == stOK {
		fmt.Fprintf(&b, " index=%d", o.Index)
	}
	if o.Replayed {
		b.WriteString(" replayed")
	}
	if o.IDs != nil {
		fmt.Fprintf(&b, " ids=%s", fmtIDs(o.IDs))
	}
	if o.Removed != nil {
		fmt.Fprintf(&b, " removed=%v", o.Removed)
	}
	if o.Kind == opLatest && o.St == stOK || o.Kind == opCompact && o.ResRows > 0 {
		fmt.Fprintf(&b, " rows=%d", o.ResRows)
	}
	if o.From != nil {
		fmt.Fprintf(&b, " from=v%d", *o.From)
	}
	if o.resolved {
		fmt.Fprintf(&b, " (unknown outcome, resolved by observation at %s)", fmtNS(o.resolvedAt))
	}
	ret := "∞"
	if o.Ret >= 0 {
		ret = fmtNS(o.Ret)
	}
	fmt.Fprintf(&b, " [%s…%s]", fmtNS(o.Call), ret)
	if len(o.Attempts) > 1 {
		fmt.Fprintf(&b, " attempts=%d", len(o.Attempts))
	}
	if o.Err != "" && o.St != stOK {
		fmt.Fprintf(&b, " err=%q", trim(o.Err, 160))
	}
	if o.Note != "" {
		fmt.Fprintf(&b, " (%s)", o.Note)
	}
	return b.String()
}

func fmtNS(ns int64) string { return fmt.Sprintf("%.3fs", float64(ns)/1e9) }

func fmtIDs(ids []int64) string {
	if len(ids) <= 12 {
		return fmt.Sprint(ids)
	}
	return fmt.Sprintf("%v…(%d)", ids[:12], len(ids))
}

// putInfo is what a put sent, registered before it is sent: every row a
// read returns is checked against it.
type putInfo struct {
	PID     int64
	Path    string
	Fam     int
	Mode    string
	Bad     string
	PartBy  []string
	Rows    []string  // canonical encodings by rn
	Regions []*string // region by rn (family part)
	// EmptyRegion: a row's region is "", which a hive directory cannot
	// tell from null: a put partitioned by region may be refused for it.
	EmptyRegion bool
}

// ---- findings ---------------------------------------------------------------

// finding is one broken invariant.
type finding struct {
	Inv     string `json:"invariant"`
	Profile string `json:"profile,omitempty"`
	Ops     []int  `json:"ops,omitempty"`
	Detail  string `json:"detail"`
}

// findings collects broken invariants from the clients and the checker.
type findings struct {
	mu   sync.Mutex
	list []finding
}

func (f *findings) add(inv, profile string, ops []int, format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.list = append(f.list, finding{Inv: inv, Profile: profile, Ops: ops, Detail: fmt.Sprintf(format, args...)})
}

func (f *findings) all() []finding {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]finding(nil), f.list...)
}

func (f *findings) count(inv string) int {
	n := 0
	for _, x := range f.all() {
		if x.Inv == inv {
			n++
		}
	}
	return n
}

// ---- the sequential model of one profile -------------------------------------

// mInput is a porcupine operation's input.
type mInput struct {
	Kind      string
	PID       int64
	Fam       int
	PartBy    []string
	Ver       int     // readv: the version asked for
	Keep      int     // retain
	Filter    *string // read with a region filter
	Filtered  bool
	Contested bool // a profile inside or above this one exists: a refused first put is allowed
	From      int  // compact: the source version it names (-1: not known)
	// EmptyRegion: the put holds a region "", so it may be refused when
	// partitioned by region.
	EmptyRegion bool
	Op          *mop // for descriptions only
}

// mOutput is a porcupine operation's output.
type mOutput struct {
	St      outStatus
	Ver     int     // -1: not known
	IDs     []int64 // sorted put ids
	Rows    int64   // latest: rows of the latest version (-1: not checked)
	Removed []int
}

// mVer is one committed version. Never mutated once built.
type mVer struct {
	fam       int
	part      []string
	ids       []int64 // sorted
	own       []int64 // sorted: the puts committed to this version (not copied by compaction)
	removed   bool
	compacted bool // made by compaction (its puts were put elsewhere)
	ghost     bool // removed by retention before anyone committed it
}

// mState is the model's state of one profile. Never mutated once built.
type mState struct {
	latest int // -1: the profile does not exist
	vers   map[int]*mVer
	key    string
}

func newState(latest int, vers map[int]*mVer) *mState {
	s := &mState{latest: latest, vers: vers}
	var b strings.Builder
	b.WriteString(strconv.Itoa(latest))
	vs := make([]int, 0, len(vers))
	for v := range vers {
		vs = append(vs, v)
	}
	sort.Ints(vs)
	for _, v := range vs {
		mv := vers[v]
		fmt.Fprintf(&b, "|%d:%d:%v:%v:%v:%v:", v, mv.fam, mv.part, mv.removed, mv.compacted, mv.ghost)
		for _, id := range mv.ids {
			b.WriteString(strconv.FormatInt(id, 36))
			b.WriteByte(',')
		}
		b.WriteByte(':')
		for _, id := range mv.own {
			b.WriteString(strconv.FormatInt(id, 36))
			b.WriteByte(',')
		}
	}
	s.key = b.String()
	return s
}

// with returns a copy of s with version v set to mv and latest moved.
func (s *mState) with(v int, mv *mVer, latest int) *mState {
	vers := make(map[int]*mVer, len(s.vers)+1)
	for k, x := range s.vers {
		vers[k] = x
	}
	if mv != nil {
		vers[v] = mv
	}
	return newState(latest, vers)
}

// home is the version a put committed to (not a compaction copy), if any.
func (s *mState) home(pid int64) (int, bool) {
	for v, mv := range s.vers {
		if _, ok := slices.BinarySearch(mv.own, pid); ok {
			return v, true
		}
	}
	return 0, false
}

func insertID(ids []int64, id int64) []int64 {
	i, _ := slices.BinarySearch(ids, id)
	out := make([]int64, 0, len(ids)+1)
	out = append(out, ids[:i]...)
	out = append(out, id)
	return append(out, ids[i:]...)
}

// modelFor is the model of one profile. rows and regions describe every
// put (read only: the model stays pure).
func modelFor(rows map[int64]int64, regions map[int64][]*string) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return newState(-1, map[int]*mVer{}) },
		Step: func(st, in, out any) (bool, any) {
			return step(st.(*mState), in.(mInput), out.(mOutput), rows, regions)
		},
		Equal: func(a, b any) bool { return a.(*mState).key == b.(*mState).key },
		Hash: func(a any) uint64 {
			h := uint64(14695981039346656037)
			for _, c := range []byte(a.(*mState).key) {
				h = (h ^ uint64(c)) * 1099511628211
			}
			return h
		},
		DescribeOperation: func(in, out any) string {
			i, ok := in.(mInput)
			if !ok {
				return fmt.Sprint(in, " → ", out)
			}
			if i.Op != nil {
				return i.Op.String()
			}
			return fmt.Sprintf("%s pid=%d → %+v", i.Kind, i.PID, out)
		},
		DescribeState: func(st any) string { return describeState(st.(*mState)) },
	}
}

func describeState(s *mState) string {
	if s.latest < 0 && len(s.vers) == 0 {
		return "(no profile)"
	}
	vs := make([]int, 0, len(s.vers))
	for v := range s.vers {
		vs = append(vs, v)
	}
	sort.Ints(vs)
	var b strings.Builder
	fmt.Fprintf(&b, "latest=v%d", s.latest)
	for _, v := range vs {
		mv := s.vers[v]
		fmt.Fprintf(&b, " v%d[%s", v, families[mv.fam].name)
		if mv.removed {
			b.WriteString(",removed")
		}
		if mv.compacted {
			b.WriteString(",compacted")
		}
		fmt.Fprintf(&b, "]%s", fmtIDs(mv.ids))
	}
	return b.String()
}

func matchRegion(a, b *string) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// step is the sequential specification of one profile (see the brief in
// model_test.go): writes create versions (the latest is the highest),
// appends land in the latest, reads return exactly a version's puts,
// compaction copies the latest, retention removes versions but never the
// latest, and a put whose request id already committed answers its first
// result and changes nothing.
func step(s *mState, in mInput, out mOutput, rows map[int64]int64, regions map[int64][]*string) (bool, any) {
	switch in.Kind {
	case opAppend, opWrite:
		if v, ok := s.home(in.PID); ok { // a replay
			return out.St == stOK && (out.Ver == v || out.Ver < 0), s
		}
		switch out.St {
		case stOK:
			if in.Kind == opAppend && s.latest >= 0 {
				lv := s.vers[s.latest]
				if (out.Ver >= 0 && out.Ver != s.latest) || lv.fam != in.Fam {
					return false, s
				}
				nv := *lv
				nv.ids = insertID(lv.ids, in.PID)
				nv.own = insertID(lv.own, in.PID)
				return true, s.with(s.latest, &nv, s.latest)
			}
			// A write, or the append that creates the profile.
			if out.Ver < 0 {
				return false, s
			}
			if _, used := s.vers[out.Ver]; used {
				return false, s
			}
			return true, s.with(out.Ver, &mVer{fam: in.Fam, part: in.PartBy, ids: []int64{in.PID}, own: []int64{in.PID}}, max(s.latest, out.Ver))
		case stRejected:
			if in.EmptyRegion && in.Kind == opWrite && slices.Contains(in.PartBy, "region") {
				return true, s
			}
			if s.latest < 0 {
				return in.Contested, s // a profile inside or above it exists
			}
			if in.Kind == opAppend {
				lv := s.vers[s.latest]
				return lv.fam != in.Fam || (in.EmptyRegion && slices.Contains(lv.part, "region")), s // schema mismatch, or ""
			}
			return false, s
		}
		return false, s
	case opCompact:
		switch out.St {
		case stOK:
			// It commits only while its source is the latest, and holds
			// exactly the source's rows at that moment (appends to the
			// source after its snapshot are carried in).
			if s.latest < 0 || out.Ver < 0 || (in.From >= 0 && in.From != s.latest) {
				return false, s
			}
			if _, used := s.vers[out.Ver]; used {
				return false, s
			}
			lv := s.vers[s.latest]
			if out.Rows >= 0 {
				var n int64
				for _, id := range lv.ids {
					n += rows[id]
				}
				if n != out.Rows {
					return false, s
				}
			}
			return true, s.with(out.Ver, &mVer{fam: lv.fam, part: lv.part, ids: lv.ids, compacted: true}, max(s.latest, out.Ver))
		case stNotFound:
			return s.latest < 0, s
		}
		return false, s
	case opRead:
		switch out.St {
		case stOK:
			if s.latest < 0 || (out.Ver >= 0 && out.Ver != s.latest) {
				return false, s
			}
			lv := s.vers[s.latest]
			if in.Filtered {
				if !slices.Contains(lv.part, "region") {
					return false, s
				}
				var want []int64
				for _, id := range lv.ids {
					for _, r := range regions[id] {
						if matchRegion(r, in.Filter) {
							want = append(want, id)
							break
						}
					}
				}
				return slices.Equal(want, out.IDs), s
			}
			return slices.Equal(lv.ids, out.IDs), s
		case stNotFound:
			return s.latest < 0, s
		case stRejected:
			return in.Filtered && s.latest >= 0 && !slices.Contains(s.vers[s.latest].part, "region"), s
		}
		return false, s
	case opReadV:
		mv, ok := s.vers[in.Ver]
		switch out.St {
		case stOK:
			return ok && !mv.removed && !mv.ghost && slices.Equal(mv.ids, out.IDs), s
		case stNotFound, stError:
			return !ok || mv.removed || mv.ghost, s
		}
		return false, s
	case opLatest:
		switch out.St {
		case stOK:
			if s.latest < 0 || out.Ver != s.latest {
				return false, s
			}
			if out.Rows >= 0 {
				var n int64
				for _, id := range s.vers[s.latest].ids {
					n += rows[id]
				}
				return n == out.Rows, s
			}
			return true, s
		case stNotFound:
			return s.latest < 0, s
		}
		return false, s
	case opRetain:
		switch out.St {
		case stOK:
			if s.latest < 0 {
				return false, s
			}
			vers := make(map[int]*mVer, len(s.vers))
			for k, x := range s.vers {
				vers[k] = x
			}
			live := 0
			for _, x := range s.vers {
				if !x.removed && !x.ghost {
					live++
				}
			}
			before := live
			for _, r := range out.Removed {
				if r == s.latest {
					return false, s
				}
				mv, ok := vers[r]
				switch {
				case !ok:
					vers[r] = &mVer{ghost: true} // a version nobody had committed
				case mv.removed || mv.ghost:
				default:
					nv := *mv
					nv.removed = true
					vers[r] = &nv
					live--
				}
			}
			if live < min(in.Keep, before) { // removed one it had to keep (Keep is 0 when unresolved)
				return false, s
			}
			return true, newState(s.latest, vers)
		case stNotFound:
			return s.latest < 0, s
		}
		return false, s
	}
	return false, s
}

// ---- turning the recorded history into porcupine histories --------------------

// observation is a put seen by a read.
type observation struct {
	op  int
	ver int // -1: not known (the read did not say)
	ret int64
}

// killEvent is one SIGKILL of a server.
type killEvent struct {
	At       int64 `json:"at_ns"`
	Server   int   `json:"server"`
	InFlight int64 `json:"in_flight"`
}

// linRec is one commit record of a profile's lineage, as the checker
// uses it.
type linRec struct {
	Seq       int64  `json:"seq"`
	Version   int    `json:"version"`
	Mode      string `json:"mode"`
	RequestID string `json:"request_id,omitempty"`
	From      int    `json:"from"`  // a compaction's source version; -1: not a compaction
	At        int64  `json:"at_ns"` // its commit time on the run's clock
}

// history is everything the run recorded.
type history struct {
	mu   sync.Mutex
	ops  []*mop
	puts map[int64]*putInfo
	obs  map[int64][]observation // pid → reads that saw it
	// final: per profile, versions present at the end and their puts;
	// lineage: per profile, request id → version from the commit records.
	final   map[string]map[int][]int64
	finalAt int64
	lineage map[string]map[string]int
	// records: per profile, its commit records at the end (lineage).
	records map[string][]linRec
	changed map[int64]bool // puts already reported as value-changed
	// runFindings: findings made during the run, before checkHistory.
	runFindings int
	ackRaces    ackRaces    // set by checkOrder
	kills       []killEvent // when the run killed which server (for reading a history)
	// clockSlack: how much later than a record's commit time (the
	// server's wall clock) the request that made it may have started by
	// the run's clock (monotonic since the start): clock reads, and a
	// wall clock slewed by NTP.
	clockSlack int64
	model      porcupine.Model // set by checkLinearizable
	f          findings
}

func newHistory() *history {
	return &history{puts: map[int64]*putInfo{}, obs: map[int64][]observation{},
		final: map[string]map[int][]int64{}, lineage: map[string]map[string]int{}, records: map[string][]linRec{}, changed: map[int64]bool{}, clockSlack: int64(5 * time.Millisecond)}
}

func (h *history) addOp(o *mop) {
	h.mu.Lock()
	o.ID = len(h.ops)
	h.ops = append(h.ops, o)
	h.mu.Unlock()
}

func (h *history) addPut(p *putInfo) {
	h.mu.Lock()
	h.puts[p.PID] = p
	h.mu.Unlock()
}

func (h *history) put(pid int64) *putInfo {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.puts[pid]
}

func (h *history) observe(pid int64, o observation) {
	h.mu.Lock()
	h.obs[pid] = append(h.obs[pid], o)
	h.mu.Unlock()
}

func (h *history) opsOf(path string) []*mop {
	var out []*mop
	for _, o := range h.ops {
		if o.Path == path {
			out = append(out, o)
		}
	}
	return out
}

// resolve gives each operation whose outcome was unknown the outcome the
// run can prove. A put: the version its rows were seen in (its commit
// record first, then the lowest version a read named), and as its return
// time the first read that saw it; a put nobody saw is left unresolved (it
// had no visible effect, and porcupine is not given it). Compactions and
// retentions: from the profile's commit records when the run fetched them
// (resolveByRecords), else from what the reads saw.
func (h *history) resolve() {
	for _, o := range h.ops {
		if !o.isPut() || o.St != stUnknown {
			continue
		}
		obs := h.obs[o.PID]
		if len(obs) == 0 {
			continue
		}
		o.resolved = true
		o.resolvedAt = obs[0].ret
		for _, x := range obs {
			o.resolvedAt = min(o.resolvedAt, x.ret)
		}
		o.Ver = -1
		if v, ok := h.lineage[o.Path][reqID(o.PID)]; ok {
			o.Ver = v
		} else {
			for _, x := range obs {
				if x.ver >= 0 && (o.Ver < 0 || x.ver < o.Ver) {
					o.Ver = x.ver
				}
			}
		}
	}
	paths := map[string]bool{}
	for _, o := range h.ops {
		if (o.Kind == opCompact || o.Kind == opRetain) && o.St == stUnknown {
			paths[o.Path] = true
		}
	}
	for p := range h.records {
		paths[p] = true // records no request accounts for are findings
	}
	for _, path := range sortedKeys(paths) {
		if recs, ok := h.records[path]; ok {
			h.resolveByRecords(path, recs)
			continue
		}
		h.resolveCompactionsByReads(path)
		h.resolveRetentionsByReads(path)
	}
}

// resolvedCounts says, by kind, how many unknown outcomes were resolved
// (took effect) and how many were left out (no effect seen).
func (h *history) resolvedCounts() string {
	var c counter
	for _, o := range h.ops {
		if o.St == stUnknown && (o.isPut() || o.Kind == opCompact || o.Kind == opRetain) {
			c.inc(fmt.Sprintf("%s:%v", o.Kind, map[bool]string{true: "resolved", false: "left-out"}[o.resolved]))
		}
	}
	return c.String()
}

// end is the time the run ended (the final check), or "never".
func (h *history) end() int64 {
	if h.finalAt > 0 {
		return h.finalAt
	}
	return math.MaxInt64
}

// seenAt: per version of path, the earliest time it is known to have
// existed: the return of a read, list-versions or put that named it, the
// resolution of an unknown put or compaction in it, and (withFinal) the
// end for versions present at the end.
func (h *history) seenAt(path string, withFinal bool) map[int]int64 {
	seen := map[int]int64{}
	note := func(v int, t int64) {
		if old, ok := seen[v]; v >= 0 && (!ok || t < old) {
			seen[v] = t
		}
	}
	if withFinal {
		for v := range h.final[path] {
			note(v, h.end())
		}
	}
	for _, o := range h.opsOf(path) {
		switch {
		case o.St == stOK && o.Ver >= 0 && (o.Kind == opReadV || o.Kind == opRead || o.Kind == opLatest || o.isPut() || o.Kind == opCompact):
			note(o.Ver, o.Ret)
		case o.resolved && o.Ver >= 0 && (o.isPut() || o.Kind == opCompact):
			note(o.Ver, o.resolvedAt)
		}
	}
	return seen
}

// pickUnknown is the unresolved operation of ops that started last at or
// before bound (nil: none).
func pickUnknown(ops []*mop, bound int64) *mop {
	var best *mop
	for _, o := range ops {
		if !o.resolved && o.Call <= bound && (best == nil || o.Call > best.Call) {
			best = o
		}
	}
	return best
}

// resolveByRecords resolves the unknown compactions and retentions of path
// from its commit records. A compaction record (a write with
// compacted_from and no request id) that no acknowledged compaction
// answered was made by an unknown one: the one that started last before
// the record's commit time and before its version was first seen. The
// retire records of one retention share one commit time; a group that no
// acknowledged retention answered goes to the unknown retention that
// started last before it. A record no request can account for is a
// finding. Unknown operations left are those that committed nothing.
func (h *history) resolveByRecords(path string, recs []linRec) {
	seen := h.seenAt(path, true)
	var comps, rets []*mop
	ackedComp := map[int]bool{}
	var ackedRet []string
	for _, o := range h.opsOf(path) {
		switch {
		case o.Kind == opCompact && o.St == stOK:
			ackedComp[o.Ver] = true
		case o.Kind == opCompact && o.St == stUnknown:
			comps = append(comps, o)
		case o.Kind == opRetain && o.St == stOK && len(o.Removed) > 0:
			ackedRet = append(ackedRet, fmt.Sprint(sortedInts(o.Removed)))
		case o.Kind == opRetain && o.St == stUnknown:
			rets = append(rets, o)
		}
	}
	slack := h.clockSlack
	for _, r := range recs {
		if r.From < 0 || ackedComp[r.Version] {
			continue
		}
		bound := r.At + slack
		t, ok := seen[r.Version]
		if ok {
			bound = min(bound, t)
		}
		c := pickUnknown(comps, bound)
		if c == nil {
			h.f.add("compaction-unaccounted", path, nil, "the commit log holds compaction #%d into v%d (from v%d) at %s, which no unanswered compact request can have made", r.Seq, r.Version, r.From, fmtNS(r.At))
			continue
		}
		from := r.From
		c.resolved, c.Ver, c.From, c.resolvedAt = true, r.Version, &from, h.end()
		if ok {
			c.resolvedAt = t
		}
	}
	// Retire records, grouped by retention (one segment, one time).
	type group struct {
		at   int64
		seq  int64
		vers []int
	}
	var groups []*group
	for _, r := range recs {
		if r.Mode != "retire" {
			continue
		}
		if n := len(groups); n > 0 && groups[n-1].at == r.At && groups[n-1].seq+int64(len(groups[n-1].vers)) == r.Seq {
			groups[n-1].vers = append(groups[n-1].vers, r.Version)
			continue
		}
		groups = append(groups, &group{at: r.At, seq: r.Seq, vers: []int{r.Version}})
	}
	for _, g := range groups {
		key := fmt.Sprint(sortedInts(g.vers))
		if i := slices.Index(ackedRet, key); i >= 0 {
			ackedRet = slices.Delete(ackedRet, i, i+1)
			continue
		}
		r := pickUnknown(rets, g.at+slack)
		if r == nil {
			h.f.add("retire-unaccounted", path, nil, "the commit log retires %v at %s (records from #%d), which no unanswered retention can have done", g.vers, fmtNS(g.at), g.seq)
			continue
		}
		r.resolved, r.Removed, r.resolvedAt = true, sortedInts(g.vers), h.end()
		// A read that found one of them gone bounds when it happened.
		for _, o := range h.opsOf(path) {
			if o.Kind == opReadV && o.St == stNotFound && o.Call > r.Call && slices.Contains(g.vers, o.ReadVer) && o.Ret < r.resolvedAt {
				r.resolvedAt = o.Ret
			}
		}
	}
}

func sortedInts(xs []int) []int {
	out := slices.Clone(xs)
	slices.Sort(out)
	return out
}

// resolveCompactionsByReads (no commit records): a version some read saw,
// or present at the end, that no write, no acknowledged compaction and no
// first append made, goes to the unknown compaction that started last
// before it was first seen, earliest seen first.
func (h *history) resolveCompactionsByReads(path string) {
	var cs []*mop
	homes := map[int]bool{}
	seen := h.seenAt(path, true)
	lowest := math.MaxInt // the profile's first version: an append may have made it
	for v := range seen {
		lowest = min(lowest, v)
	}
	for _, o := range h.opsOf(path) {
		switch {
		case o.Kind == opCompact && o.St == stUnknown:
			cs = append(cs, o)
		case o.Kind == opCompact && o.St == stOK:
			homes[o.Ver] = true
		case o.isPut() && (o.St == stOK || o.resolved) && o.Ver >= 0 && (o.putMode() == "write" || o.Ver == lowest):
			homes[o.Ver] = true
		}
	}
	var orphans []int
	for v := range seen {
		if !homes[v] {
			orphans = append(orphans, v)
		}
	}
	sort.Slice(orphans, func(a, b int) bool {
		if seen[orphans[a]] != seen[orphans[b]] {
			return seen[orphans[a]] < seen[orphans[b]]
		}
		return orphans[a] < orphans[b]
	})
	for _, v := range orphans {
		if c := pickUnknown(cs, seen[v]-1); c != nil {
			c.resolved, c.Ver, c.resolvedAt = true, v, seen[v]
		}
	}
}

// resolveRetentionsByReads (no commit records): a version once seen that
// a later pinned read did not find, or that is gone at the end, and that
// no acknowledged retention removed, goes to the unknown retention that
// started last before the first evidence of its removal.
func (h *history) resolveRetentionsByReads(path string) {
	var rs []*mop
	removed := map[int]bool{}
	for _, o := range h.opsOf(path) {
		switch {
		case o.Kind == opRetain && o.St == stOK:
			for _, r := range o.Removed {
				removed[r] = true
			}
		case o.Kind == opRetain && o.St == stUnknown:
			rs = append(rs, o)
		}
	}
	seen := h.seenAt(path, false)
	final, known := h.final[path]
	got := map[*mop][]int{}
	at := map[*mop]int64{}
	for _, v := range sortedIntKeys(seen) {
		if removed[v] {
			continue
		}
		evidence := int64(-1)
		for _, o := range h.opsOf(path) {
			if o.Kind == opReadV && o.ReadVer == v && o.St == stNotFound && o.Call > seen[v] && (evidence < 0 || o.Ret < evidence) {
				evidence = o.Ret
			}
		}
		if _, present := final[v]; evidence < 0 && known && !present {
			evidence = h.end()
		}
		if evidence < 0 {
			continue
		}
		r := pickUnknown(rs, evidence-1)
		if r == nil {
			continue // nothing can have removed it: the model will say so
		}
		got[r] = append(got[r], v)
		if t, ok := at[r]; !ok || evidence < t {
			at[r] = evidence
		}
	}
	for r, vs := range got {
		r.resolved, r.Removed, r.resolvedAt = true, sortedInts(vs), at[r]
	}
}

func sortedIntKeys[V any](m map[int]V) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}

// contested: whether a profile inside or above path ever existed.
func (h *history) contested(path string) bool {
	for _, o := range h.ops {
		if o.isPut() && (o.St == stOK || o.resolved) && nestedPair(path, o.Path) {
			return true
		}
	}
	return false
}

// retentionOverlaps: whether a retention of path ran during [call, ret].
func (h *history) retentionOverlaps(path string, call, ret int64) bool {
	for _, o := range h.ops {
		if o.Path == path && o.Kind == opRetain && o.Call <= ret && (o.Ret < 0 || o.Ret >= call) {
			return true
		}
	}
	return false
}

// porcupineOps turns the history of one profile into porcupine operations.
// Left out: reserved paths and calls with reserved keys (checked
// directly: always refused), refused bad puts and cancelled puts (checked
// directly: never visible), unresolved unknown outcomes, reads that told nothing (unknown)
// or failed while a retention ran (documented), global actions.
func (h *history) porcupineOps(path string) []porcupine.Operation {
	if keyKindOf(path) == keyReserved {
		return nil // every call must be refused: checked directly
	}
	contested := h.contested(path)
	var out []porcupine.Operation
	for _, o := range h.opsOf(path) {
		in := mInput{Kind: o.Kind, PID: o.PID, Fam: o.Fam, PartBy: o.PartBy, Ver: o.ReadVer, Keep: o.Keep,
			Filter: o.Filter, Filtered: o.Read == "part", Contested: contested, From: -1, Op: o}
		if o.From != nil {
			in.From = *o.From
		}
		if p := h.puts[o.PID]; p != nil && o.isPut() {
			in.EmptyRegion = p.EmptyRegion
		}
		res := mOutput{St: o.St, Ver: o.Ver, IDs: o.IDs, Rows: -1, Removed: o.Removed}
		ret := o.Ret
		switch o.Kind {
		case opAppend, opWrite, opDup, opBad:
			in.Kind = opAppend
			if o.putMode() == "write" {
				in.Kind = opWrite
			}
			if o.Kind == opBad && o.St != stOK && !o.resolved {
				continue
			}
		case opCancel, opSweep, opList, opLineage, opBadKey:
			continue
		case opLatest:
			res.Rows = o.ResRows
		case opCompact:
			if o.St == stOK && o.ResRows > 0 {
				res.Rows = o.ResRows
			}
		case opRetain:
			if o.resolved {
				in.Keep = 0
			}
		case opRead:
			if o.Read != "info" {
				res.Ver = -1
			}
		}
		switch o.St {
		case stUnknown:
			if !o.resolved || (o.Kind == opWrite && o.Ver < 0) || (o.Kind == opCompact && o.Ver < 0) {
				continue
			}
			res.St = stOK
			ret = math.MaxInt64
			if o.resolvedAt > 0 {
				ret = o.resolvedAt
			}
		case stError:
			if o.Kind == opRead || o.Kind == opReadV || o.Kind == opLatest {
				if h.retentionOverlaps(path, o.Call, o.Ret) {
					continue
				}
				if o.Kind == opRead || o.Kind == opLatest {
					continue // reported directly as read-failed
				}
			}
		case stNotFound:
			// A read, or a compaction reading its source, may find the
			// version it reads removed by a retention with grace 0
			// (DESIGN §3.1: grace_s 0 removes at once). It had no effect.
			if (o.Kind == opRead || o.Kind == opLatest || o.Kind == opCompact) && h.retentionOverlaps(path, o.Call, o.Ret) {
				continue
			}
		}
		if ret < 0 {
			continue
		}
		out = append(out, porcupine.Operation{ClientId: max(o.Client, 0), Input: in, Output: res, Call: o.Call, Return: ret})
	}
	return out
}

// linResult is porcupine's verdict on one profile.
type linResult struct {
	Path    string
	Ops     int
	Result  porcupine.CheckResult
	Info    porcupine.LinearizationInfo
	Stuck   []*mop // ops not in the longest partial linearization, earliest first
	Longest []*mop
	State   string // the model's state after the longest partial linearization
}

// checkLinearizable runs porcupine on every profile.
func (h *history) checkLinearizable(timeout time.Duration) []linResult {
	rows := map[int64]int64{}
	regions := map[int64][]*string{}
	for pid, p := range h.puts {
		rows[pid] = int64(len(p.Rows))
		regions[pid] = p.Regions
	}
	model := modelFor(rows, regions)
	h.model = model
	paths := map[string]bool{}
	for _, o := range h.ops {
		if o.Path != "" {
			paths[o.Path] = true
		}
	}
	var names []string
	for p := range paths {
		names = append(names, p)
	}
	sort.Strings(names)
	var out []linResult
	deadline := time.Now().Add(4 * timeout) // the whole check's budget
	for _, p := range names {
		ops := h.porcupineOps(p)
		if len(ops) == 0 {
			continue
		}
		left := time.Until(deadline)
		if left < time.Second {
			out = append(out, linResult{Path: p, Ops: len(ops), Result: porcupine.Unknown})
			continue
		}
		res, info := porcupine.CheckOperationsVerbose(model, ops, min(timeout, left))
		lr := linResult{Path: p, Ops: len(ops), Result: res, Info: info}
		if res == porcupine.Illegal {
			lr.Longest, lr.Stuck, lr.State = explain(model, ops, info)
		}
		out = append(out, lr)
	}
	return out
}

// explain returns the longest partial linearization porcupine found and
// the operations it could not place after it, earliest call first: the
// first of those is where the history stops making sense.
func explain(model porcupine.Model, ops []porcupine.Operation, info porcupine.LinearizationInfo) (longest, stuck []*mop, state string) {
	var best []int
	for _, part := range info.PartialLinearizations() {
		for _, lin := range part {
			if len(lin) > len(best) {
				best = lin
			}
		}
	}
	in := map[int]bool{}
	st := model.Init()
	for _, i := range best {
		in[i] = true
		longest = append(longest, ops[i].Input.(mInput).Op)
		_, st = model.Step(st, ops[i].Input, ops[i].Output)
	}
	state = model.DescribeState(st)
	var rest []porcupine.Operation
	for i, o := range ops {
		if !in[i] {
			rest = append(rest, o)
		}
	}
	sort.Slice(rest, func(a, b int) bool { return rest[a].Call < rest[b].Call })
	for _, o := range rest {
		stuck = append(stuck, o.Input.(mInput).Op)
	}
	return longest, stuck, state
}

// ---- direct checks ------------------------------------------------------------

// directChecks checks, over the whole history, the invariants that can be
// named one by one.
func (h *history) directChecks() {
	f := &h.f
	byPID := map[int64][]*mop{}
	for _, o := range h.ops {
		if o.isPut() || o.Kind == opCancel {
			byPID[o.PID] = append(byPID[o.PID], o)
		}
	}
	for pid, ops := range byPID {
		path := ops[0].Path
		var acked []*mop
		everRejectedOnly := true
		for _, o := range ops {
			if o.St == stOK {
				acked = append(acked, o)
			}
			if o.St != stRejected && o.Kind != opCancel {
				everRejectedOnly = false
			}
		}
		// A refused or cancelled put is never visible.
		if obs := h.obs[pid]; len(obs) > 0 && everRejectedOnly {
			what := "rejected-put-visible"
			if ops[0].Kind == opCancel {
				what = "cancelled-put-visible"
			}
			f.add(what, path, []int{ops[0].ID, obs[0].op}, "put %d (%s) was refused or abandoned mid-stream, yet read #%d returned its rows", pid, ops[0].Code, obs[0].op)
		}
		// A retried put answers its first result.
		for i := 1; i < len(acked); i++ {
			a, b := acked[0], acked[i]
			if a.Ver != b.Ver || a.Index != b.Index {
				f.add("retry-different-result", path, []int{a.ID, b.ID}, "put %d acknowledged twice with different results: v%d index %d, then v%d index %d", pid, a.Ver, a.Index, b.Ver, b.Index)
			}
		}
	}
	type unexp struct {
		first     *mop
		code, err string
		n         int
	}
	unexpected := map[string]*unexp{}
	for _, o := range h.ops {
		// Bad input is refused with InvalidArgument.
		if o.Kind == opBad {
			switch {
			case o.St == stOK:
				f.add("bad-input-accepted", o.Path, []int{o.ID}, "%s put (%s) was acknowledged (v%d); want InvalidArgument", o.Bad, badWhy(o), o.Ver)
			case o.St == stRejected && o.Code != "InvalidArgument":
				f.add("bad-input-wrong-code", o.Path, []int{o.ID}, "%s put (%s) refused with %s; want InvalidArgument", o.Bad, badWhy(o), o.Code)
			}
		}
		// Every call with a reserved key is refused with InvalidArgument.
		if o.Kind == opBadKey && o.St != stUnknown && o.Code != "InvalidArgument" {
			f.add("reserved-key-not-refused", o.Path, []int{o.ID}, "%s of %q (%s) answered %s; want InvalidArgument", o.Mode, trim(o.Path, 60), badWhy(o), o.Code)
		}
		for _, a := range o.Attempts {
			if a.Code == "Internal" || a.Code == "DataLoss" && o.Kind != opRead && o.Kind != opReadV {
				k := o.Path + "\x00" + o.Kind + "\x00" + a.Code
				if unexpected[k] == nil {
					unexpected[k] = &unexp{first: o, code: a.Code, err: a.Err}
				}
				unexpected[k].n++
				break
			}
		}
		// A refusal as nested names a profile that exists.
		if o.isPut() && o.St == stRejected {
			if _, q, ok := strings.Cut(o.Err, "inside profile "); ok {
				if !h.created(q) {
					f.add("refused-inside-phantom-profile", o.Path, []int{o.ID}, "refused as inside profile %q, which no acknowledged put created (a layout-named directory makes it look like one?)", trim(q, 60))
				}
			}
		}
		// Reads fail only while a retention removes what they read.
		if (o.Kind == opRead || o.Kind == opLatest) && o.St == stError && o.Code != "Internal" && !h.retentionOverlaps(o.Path, o.Call, o.Ret) {
			f.add("read-failed", o.Path, []int{o.ID}, "%s failed with %s and no retention ran: %s", o.Kind, o.Code, trim(o.Err, 200))
		}
		// Put results describe the put.
		if o.isPut() && o.St == stOK && !o.Replayed {
			if p := h.puts[o.PID]; p != nil && o.ResRows != int64(len(p.Rows)) {
				f.add("bad-put-result", o.Path, []int{o.ID}, "result says %d rows; the put sent %d", o.ResRows, len(p.Rows))
			}
		}
	}
	for _, k := range sortedKeys(unexpected) {
		u := unexpected[k]
		f.add("unexpected-error", u.first.Path, []int{u.first.ID}, "%s answered %s (%d operations like it): %s", u.first.Kind, u.code, u.n, trim(u.err, 200))
	}
	h.checkOrder()
	h.checkLatestBelow()
	h.checkSeq()
	h.checkFirstAppends()
	h.checkFinal()
	h.checkNested()
}

// keyKindOf is the kind of a profile path: reserved if the server must
// refuse it (reservedWhy).
func keyKindOf(path string) keyKind {
	if reservedWhy(path) != "" {
		return keyReserved
	}
	return keyGood
}

func badWhy(o *mop) string {
	if o.Bad == "reserved-key" || o.Kind == opBadKey {
		for _, k := range modelKeys {
			if k.path == o.Path {
				return k.why
			}
		}
		return reservedWhy(o.Path)
	}
	return o.Bad
}

// checkOrder: a write that starts after a version was observed gets a
// higher version (versions are claimed, never reused); an append that
// lands below a write's (or compaction's) version started before that was
// acknowledged and committed before it (DESIGN invariant 6: the commit
// order is the log's, and an append commits into the version latest at
// its commit).
//
// An append that overlaps a write, commits first (lower seq) and is
// acknowledged after it is a race of two concurrent acknowledgements, not
// a violation: the linearization puts the append first, as its seq says
// (a batch's appends commit one cycle before its writes, and the answers
// travel on different streams). Those are counted in h.ackRaces, not
// reported. Without seq numbers the order of acknowledgements is all
// there is, and it is held to.
func (h *history) checkOrder() {
	f := &h.f
	type seen struct {
		ret int64
		ver int
		op  *mop
	}
	by := map[string][]seen{}
	var writes, appends []*mop
	for _, o := range h.ops {
		if o.St != stOK || o.Ver < 0 {
			continue
		}
		switch {
		case o.isPut() && o.putMode() == "write" && !o.Replayed, o.Kind == opCompact:
			writes = append(writes, o)
		case o.isPut() && o.putMode() == "append" && !o.Replayed:
			appends = append(appends, o)
		}
		if o.isPut() || o.Kind == opCompact || o.Kind == opLatest || (o.Kind == opRead && o.Read == "info") {
			by[o.Path] = append(by[o.Path], seen{o.Ret, o.Ver, o})
		}
	}
	for _, w := range writes {
		if w.Kind == opCompact {
			continue // a compaction's version is claimed when it writes, like a write's; checked as a write below
		}
		for _, s := range by[w.Path] {
			if s.ret < w.Call && s.ver >= w.Ver && s.op != w {
				f.add("write-version-order", w.Path, []int{s.op.ID, w.ID}, "write got v%d though v%d was observed (by #%d) before it started", w.Ver, s.ver, s.op.ID)
				break
			}
		}
	}
	h.ackRaces = ackRaces{}
	for _, a := range appends {
		for _, w := range writes {
			if w.Path != a.Path || a.Ver >= w.Ver {
				continue
			}
			what := "write"
			if w.Kind == opCompact {
				what = "compaction"
			}
			seqs := a.Seq > 0 && w.Seq > 0
			switch {
			case a.Call > w.Ret:
				f.add("append-after-"+what, a.Path, []int{w.ID, a.ID}, "append started after %s #%d (v%d) was acknowledged, yet landed in v%d", what, w.ID, w.Ver, a.Ver)
			case seqs && a.Seq > w.Seq:
				f.add("append-committed-after-"+what, a.Path, []int{w.ID, a.ID}, "append committed after %s #%d (seq %d > %d), yet landed in the older v%d, not in v%d or later", what, w.ID, a.Seq, w.Seq, a.Ver, w.Ver)
			case a.Ret > w.Ret && len(a.Attempts) <= 1 && !seqs:
				// (A retried append whose first attempt committed before
				// the write, its answer lost, is answered its first record:
				// it took effect before the write.)
				f.add("append-acked-after-"+what, a.Path, []int{w.ID, a.ID}, "append acknowledged after %s #%d (v%d) was acknowledged landed in v%d (concurrent with it; no seq numbers tell which committed first)", what, w.ID, w.Ver, a.Ver)
			case a.Ret > w.Ret && len(a.Attempts) <= 1:
				h.ackRaces.add(a, w)
			}
		}
	}
}

// ackRaces counts appends acknowledged after an overlapping write or
// compaction was, that landed below its version and committed before it
// (lower seq): legal, reported as a figure.
type ackRaces struct {
	N       int
	MaxLag  int64 // the longest delay of such an append's answer after the write's
	Example string
}

func (r *ackRaces) add(a, w *mop) {
	r.N++
	if lag := a.Ret - w.Ret; lag > r.MaxLag {
		r.MaxLag = lag
		r.Example = fmt.Sprintf("append #%d (seq %d, v%d) answered %s after %s #%d (seq %d, v%d)", a.ID, a.Seq, a.Ver, time.Duration(lag), w.Kind, w.ID, w.Seq, w.Ver)
	}
}

func (r ackRaces) String() string {
	if r.N == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (longest: %s)", r.N, r.Example)
}

// checkLatestBelow: the latest version is the highest committed one, so
// a version that is readable before and after a read of the latest is not
// above it. (A version a killed write or compaction left readable while
// the manifest never moves to it breaks this.)
func (h *history) checkLatestBelow() {
	by := map[string][]*mop{}
	for _, o := range h.ops {
		if o.St == stOK && o.Ver >= 0 && (o.Kind == opReadV || o.Kind == opLatest || o.Kind == opRead && o.Read == "info") {
			by[o.Path] = append(by[o.Path], o)
		}
	}
	for path, ops := range by {
		reported := map[int]bool{}
		for _, l := range ops {
			if l.Kind == opReadV {
				continue
			}
			for _, r1 := range ops {
				if r1.Kind != opReadV || r1.Ver <= l.Ver || r1.Ret >= l.Call || reported[r1.Ver] {
					continue
				}
				for _, r2 := range ops {
					if r2.Kind == opReadV && r2.Ver == r1.Ver && r2.Call > l.Ret {
						reported[r1.Ver] = true
						h.f.add("latest-below-readable-version", path, []int{r1.ID, l.ID, r2.ID}, "v%d was readable before and after a read that found the latest to be v%d", r1.Ver, l.Ver)
						break
					}
				}
			}
		}
	}
}

// checkSeq: when results carry the commit record's number (seq), the
// numbers of one profile are distinct (a resend answers its first one) and
// follow real time: a commit acknowledged before another started has the
// lower number.
func (h *history) checkSeq() {
	by := map[string][]*mop{}
	for _, o := range h.ops {
		if o.St == stOK && o.Seq > 0 && (o.isPut() || o.Kind == opCompact) {
			by[o.Path] = append(by[o.Path], o)
		}
	}
	for path, ops := range by {
		seen := map[int64]*mop{}
		for _, o := range ops {
			if p, ok := seen[o.Seq]; ok && p.PID != o.PID || ok && o.PID == 0 {
				h.f.add("seq-reused", path, []int{p.ID, o.ID}, "two commits answered seq %d", o.Seq)
			}
			seen[o.Seq] = o
		}
		for _, a := range ops {
			for _, b := range ops {
				// A replay (a retry with the same request id) answers its
				// first commit's record, whenever it is asked.
				if a.Ret < b.Call && a.Seq >= b.Seq && a.PID != b.PID && !b.Replayed {
					h.f.add("seq-order", path, []int{a.ID, b.ID}, "#%d (seq %d) was acknowledged before #%d (seq %d) started", a.ID, a.Seq, b.ID, b.Seq)
				}
			}
		}
	}
}

// checkFirstAppends: concurrent first appends to a new profile converge
// on one version. The first appends of a profile are the appends that
// started before any put to it was acknowledged; leaving out those that
// landed in a version a write made, the acknowledged ones name one version.
func (h *history) checkFirstAppends() {
	byPath := map[string][]*mop{}
	for _, o := range h.ops {
		if o.isPut() || o.Kind == opCompact {
			byPath[o.Path] = append(byPath[o.Path], o)
		}
	}
	for path, ops := range byPath {
		firstAck := int64(math.MaxInt64)
		written := map[int]bool{}
		for _, o := range ops {
			if o.St == stOK && o.Ret < firstAck && o.Kind != opCompact {
				firstAck = o.Ret
			}
			if (o.St == stOK || o.resolved) && (o.putMode() == "write" || o.Kind == opCompact) {
				written[o.Ver] = true
			}
		}
		vs := map[int][]int{}
		n := 0
		for _, o := range ops {
			if o.Call < firstAck && o.St == stOK && o.isPut() && o.putMode() == "append" && !written[o.Ver] {
				vs[o.Ver] = append(vs[o.Ver], o.ID)
				n++
			}
		}
		if len(vs) < 2 {
			continue
		}
		var ids []int
		var parts []string
		for v, os := range vs {
			ids = append(ids, os...)
			parts = append(parts, fmt.Sprintf("v%d by %v", v, os))
		}
		sort.Strings(parts)
		sort.Ints(ids)
		h.f.add("first-appends-diverged", path, ids, "%d concurrent first appends landed in %d versions: %s", n, len(vs), strings.Join(parts, ", "))
	}
}

// checkFinal: every acknowledged put is, at the end, exactly once in the
// version its result names (unless retention removed that version), and
// in no other version except compaction copies.
func (h *history) checkFinal() {
	f := &h.f
	for path, vers := range h.final {
		in := map[int64][]int{}
		for v, ids := range vers {
			for _, id := range ids {
				in[id] = append(in[id], v)
			}
		}
		for _, o := range h.opsOf(path) {
			if !o.isPut() || o.St != stOK || o.Ver < 0 {
				continue
			}
			if _, present := vers[o.Ver]; !present {
				continue // removed by retention (the model checks that was allowed)
			}
			if !slices.Contains(in[o.PID], o.Ver) {
				f.add("acked-put-missing", path, []int{o.ID}, "put %d was acknowledged in v%d; at the end v%d does not hold it (it is in %v)", o.PID, o.Ver, o.Ver, in[o.PID])
			}
		}
		compacted := map[int]bool{}
		for _, o := range h.opsOf(path) {
			if o.Kind == opCompact && (o.St == stOK || o.resolved) {
				compacted[o.Ver] = true
			}
		}
		for id, vs := range in {
			var odd []int
			for _, v := range vs {
				if !compacted[v] && !h.isHome(path, id, v) {
					odd = append(odd, v)
				}
			}
			if len(odd) > 0 {
				p := h.puts[id]
				var ops []int
				for _, o := range h.ops {
					if o.PID == id {
						ops = append(ops, o.ID)
					}
				}
				f.add("put-in-wrong-version", path, ops, "put %d (put to %q) is in %v; its own version is %s", id, p.Path, odd, h.homeOf(id))
			}
		}
	}
}

// created: whether a put to path was acknowledged (or took effect).
func (h *history) created(path string) bool {
	for _, o := range h.ops {
		if o.Path == path && o.isPut() && (o.St == stOK || o.resolved) {
			return true
		}
	}
	return false
}

func (h *history) isHome(path string, pid int64, v int) bool {
	for _, o := range h.ops {
		if o.PID == pid && o.Path == path && (o.St == stOK || o.resolved) && o.Ver == v {
			return true
		}
	}
	return false
}

func (h *history) homeOf(pid int64) string {
	for _, o := range h.ops {
		if o.PID == pid && (o.St == stOK || o.resolved) {
			return "v" + strconv.Itoa(o.Ver)
		}
	}
	return "none (never acknowledged)"
}

// checkNested: a profile inside or above another never both exist.
func (h *history) checkNested() {
	exists := map[string]int{}
	for path, vers := range h.final {
		if len(vers) > 0 {
			exists[path] = -1
		}
	}
	for _, o := range h.ops {
		if o.isPut() && o.St == stOK {
			if _, ok := exists[o.Path]; !ok || exists[o.Path] < 0 {
				exists[o.Path] = o.ID
			}
		}
	}
	var paths []string
	for p := range exists {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for i, p := range paths {
		for _, q := range paths[i+1:] {
			if nestedPair(p, q) {
				h.f.add("nested-profiles-both-exist", p, []int{exists[p], exists[q]}, "profiles %q and %q both exist (first acknowledged puts #%d, #%d)", trim(p, 60), trim(q, 60), exists[p], exists[q])
			}
		}
	}
}

// ---- reads: rows against what was put ------------------------------------------

// rowObs is one row a read returned.
type rowObs struct {
	pid   int64
	null  bool // pid was null
	rn    int32
	canon string
}

// checkRows checks the rows one read returned against the puts and
// records which puts it saw. full: every column was read (values are
// compared); filter: only rows of that region are expected.
func (h *history) checkRows(o *mop, rows []rowObs, full bool, filter *string, filtered bool) []int64 {
	f := &h.f
	type got struct{ n map[int32]int }
	by := map[int64]*got{}
	nulls := 0
	for _, r := range rows {
		if r.null {
			nulls++
			continue
		}
		g := by[r.pid]
		if g == nil {
			g = &got{n: map[int32]int{}}
			by[r.pid] = g
		}
		g.n[r.rn]++
	}
	if nulls > 0 {
		f.add("phantom-rows", o.Path, []int{o.ID}, "%d rows with a null pid", nulls)
	}
	changed := 0
	var example string
	h.mu.Lock()
	for _, r := range rows {
		if r.null || !full || h.changed[r.pid] {
			continue // a put whose values changed is reported once
		}
		p := h.puts[r.pid]
		if p == nil || int(r.rn) >= len(p.Rows) || r.rn < 0 {
			continue
		}
		if want := p.Rows[r.rn]; want != r.canon {
			changed++
			if example == "" {
				example = fmt.Sprintf("put %d (%s) row %d: %s", r.pid, badOr(p.Bad), r.rn, trim(diffCanon(want, r.canon), 300))
			}
		}
	}
	for _, r := range rows {
		if p := h.puts[r.pid]; p != nil && !r.null && full && int(r.rn) < len(p.Rows) && r.rn >= 0 && p.Rows[r.rn] != r.canon {
			h.changed[r.pid] = true
		}
	}
	h.mu.Unlock()
	if changed > 0 {
		f.add("value-changed", o.Path, []int{o.ID}, "%d rows differ from what was put (put → read); first: %s", changed, example)
	}
	var ids []int64
	for pid, g := range by {
		p := h.put(pid)
		if p == nil {
			f.add("phantom-rows", o.Path, []int{o.ID}, "rows of pid %d, which no client put", pid)
			continue
		}
		ids = append(ids, pid)
		want := map[int32]bool{}
		for rn := range p.Rows {
			if !filtered || (rn < len(p.Regions) && matchRegion(p.Regions[rn], filter)) {
				want[int32(rn)] = true
			}
		}
		var missing, dup, extra int
		for rn := range want {
			switch c := g.n[rn]; {
			case c == 0:
				missing++
			case c > 1:
				dup++
			}
		}
		for rn := range g.n {
			if !want[rn] {
				extra++
			}
		}
		if missing > 0 {
			f.add("partial-put-visible", o.Path, []int{o.ID}, "put %d: %d of its %d rows read, %d missing", pid, len(want)-missing, len(want), missing)
		}
		if dup > 0 {
			f.add("duplicate-rows", o.Path, []int{o.ID}, "put %d: %d rows read more than once", pid, dup)
		}
		if extra > 0 {
			f.add("phantom-rows", o.Path, []int{o.ID}, "put %d (%s): %d rows it did not send, or outside the filter", pid, badOr(p.Bad), extra)
		}
		if p.Path != o.Path {
			f.add("rows-in-another-profile", o.Path, []int{o.ID}, "put %d was put to %q", pid, trim(p.Path, 60))
		}
	}
	slices.Sort(ids)
	return ids
}

// diffCanon shows the columns where two canonical rows differ.
func badOr(bad string) string {
	if bad == "" {
		return "valid data"
	}
	return "bad input " + bad
}

func diffCanon(want, got string) string {
	wm, gm := canonMap(want), canonMap(got)
	var parts []string
	for k, w := range wm {
		if g, ok := gm[k]; !ok {
			parts = append(parts, fmt.Sprintf("%s=%s→(missing)", k, trim(w, 40)))
		} else if g != w {
			parts = append(parts, fmt.Sprintf("%s=%s→%s", k, trim(w, 40), trim(g, 40)))
		}
	}
	for k, g := range gm {
		if _, ok := wm[k]; !ok {
			parts = append(parts, fmt.Sprintf("(extra) %s=%s", k, trim(g, 40)))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

func canonMap(s string) map[string]string {
	m := map[string]string{}
	for _, kv := range strings.Split(strings.TrimSuffix(s, ";"), ";") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

// ---- the report -------------------------------------------------------------

// report prints the findings grouped by invariant (a few examples each,
// with the operations involved) and porcupine's verdicts.
func (h *history) report(lin []linResult, maxExamples int) string {
	var b strings.Builder
	groups := map[string][]finding{}
	for _, x := range h.f.all() {
		groups[x.Inv] = append(groups[x.Inv], x)
	}
	var invs []string
	for k := range groups {
		invs = append(invs, k)
	}
	sort.Strings(invs)
	b.WriteString("\nbroken invariants (count):")
	for _, inv := range invs {
		fmt.Fprintf(&b, " %s=%d", inv, len(groups[inv]))
	}
	b.WriteString("\n")
	for _, inv := range invs {
		g := groups[inv]
		fmt.Fprintf(&b, "\n== %s: %d\n", inv, len(g))
		for i, x := range g {
			if i == maxExamples {
				fmt.Fprintf(&b, "   … %d more\n", len(g)-i)
				break
			}
			fmt.Fprintf(&b, " - profile %q: %s\n", trim(x.Profile, 60), x.Detail)
			for _, id := range x.Ops {
				if id >= 0 && id < len(h.ops) {
					fmt.Fprintf(&b, "     %s\n", h.ops[id])
				}
			}
		}
	}
	for _, l := range lin {
		if l.Result == porcupine.Ok {
			continue
		}
		fmt.Fprintf(&b, "\n== linearizability: profile %q: %s (%d ops)\n", trim(l.Path, 60), l.Result, l.Ops)
		also := map[string]bool{}
		for _, x := range h.f.all() {
			if x.Profile == l.Path && x.Inv != "linearizability" {
				also[x.Inv] = true
			}
		}
		if len(also) > 0 {
			fmt.Fprintf(&b, "   direct findings on this profile: %s\n", strings.Join(sortedKeys(also), ", "))
		}
		if l.Result != porcupine.Illegal {
			continue
		}
		n := len(l.Longest)
		fmt.Fprintf(&b, "   longest linearizable prefix: %d ops; its last ones:\n", n)
		for _, o := range l.Longest[max(0, n-4):] {
			fmt.Fprintf(&b, "     %s\n", o)
		}
		fmt.Fprintf(&b, "   the model's state after it: %s\n", trim(l.State, 600))
		var res []*mop
		for _, o := range h.opsOf(l.Path) {
			if o.resolved {
				res = append(res, o)
			}
		}
		if len(res) > 0 {
			fmt.Fprintf(&b, "   unknown outcomes resolved (%d; the last ones):\n", len(res))
			for _, o := range res[max(0, len(res)-4):] {
				fmt.Fprintf(&b, "     %s\n", o)
			}
		}
		fmt.Fprintf(&b, "   could not be placed after it (earliest first):\n")
		for i, o := range l.Stuck {
			if i == 6 {
				fmt.Fprintf(&b, "     … %d more\n", len(l.Stuck)-i)
				break
			}
			fmt.Fprintf(&b, "     %s\n", o)
		}
	}
	return b.String()
}

// checkHistory runs every check and porcupine (with a timeout per
// profile) over a finished history.
func (h *history) checkHistory(ctx context.Context, timeout time.Duration) []linResult {
	h.runFindings = len(h.f.all())
	h.resolve()
	h.directChecks()
	if ctx.Err() != nil {
		return nil
	}
	lin := h.checkLinearizable(timeout)
	for _, l := range lin {
		if l.Result == porcupine.Illegal {
			var ids []int
			for i, o := range l.Stuck {
				if i == 3 {
					break
				}
				ids = append(ids, o.ID)
			}
			h.f.add("linearizability", l.Path, ids, "the history of %q has no linearization (%d ops); see the ops below and the visualization", trim(l.Path, 60), l.Ops)
		}
	}
	return lin
}

// ---- saving a history and checking it again ----------------------------------

// savedPut is what the checker needs of a put (its rows by count only).
type savedPut struct {
	PID         int64     `json:"pid"`
	Path        string    `json:"path"`
	Fam         int       `json:"fam"`
	Mode        string    `json:"mode,omitempty"`
	Bad         string    `json:"bad,omitempty"`
	PartBy      []string  `json:"partition_by,omitempty"`
	Rows        int       `json:"rows"`
	Regions     []*string `json:"regions,omitempty"`
	EmptyRegion bool      `json:"empty_region,omitempty"`
}

// savedHistory is the file a failed run leaves (history.json): enough to
// run the checker on it again (QUIVER_MODEL_RECHECK) after changing it.
type savedHistory struct {
	Seed     uint64    `json:"seed"`
	Config   genConfig `json:"config"`
	Findings []finding `json:"findings"`
	// RunFindings: how many of Findings were made during the run (the
	// rest are the checker's).
	RunFindings int                        `json:"run_findings"`
	Ops         []*mop                     `json:"ops"`
	Puts        []savedPut                 `json:"puts"`
	Final       map[string]map[int][]int64 `json:"final"`
	FinalAt     int64                      `json:"final_at_ns"`
	Lineage     map[string]map[string]int  `json:"lineage"`
	Records     map[string][]linRec        `json:"records"`
	Kills       []killEvent                `json:"kills"`
}

// dump writes the history (with the findings so far) to file.
func (h *history) dump(file string, seed uint64, cfg genConfig) error {
	h.mu.Lock()
	sh := savedHistory{Seed: seed, Config: cfg, Findings: h.f.all(), RunFindings: h.runFindings, Ops: h.ops, Final: h.final, FinalAt: h.finalAt, Lineage: h.lineage, Records: h.records, Kills: h.kills}
	for _, p := range h.puts {
		sh.Puts = append(sh.Puts, savedPut{PID: p.PID, Path: p.Path, Fam: p.Fam, Mode: p.Mode, Bad: p.Bad, PartBy: p.PartBy, Rows: len(p.Rows), Regions: p.Regions, EmptyRegion: p.EmptyRegion})
	}
	h.mu.Unlock()
	sort.Slice(sh.Puts, func(a, b int) bool { return sh.Puts[a].PID < sh.Puts[b].PID })
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return fmt.Errorf("save history: %w", err)
	}
	b, err := json.Marshal(sh)
	if err != nil {
		return fmt.Errorf("save history: %w", err)
	}
	return os.WriteFile(file, b, 0o644)
}

// loadHistory reads a dumped history back as it was before the final
// check: the operations, the puts (rows as placeholders: reads are not
// checked again), what the reads observed, the end state.
func loadHistory(file string) (*history, *savedHistory, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, nil, fmt.Errorf("load history: %w", err)
	}
	var sh savedHistory
	if err := json.Unmarshal(b, &sh); err != nil {
		return nil, nil, fmt.Errorf("load history %s: %w", filepath.Base(file), err)
	}
	h := newHistory()
	for _, p := range sh.Puts {
		h.puts[p.PID] = &putInfo{PID: p.PID, Path: p.Path, Fam: p.Fam, Mode: p.Mode, Bad: p.Bad, PartBy: p.PartBy, Rows: make([]string, p.Rows), Regions: p.Regions, EmptyRegion: p.EmptyRegion}
	}
	h.ops = sh.Ops
	for i, o := range h.ops {
		o.ID = i
		if (o.Kind == opRead || o.Kind == opReadV) && o.St == stOK {
			if o.IDs == nil {
				o.IDs = []int64{}
			}
			for _, id := range o.IDs {
				h.observe(id, observation{op: o.ID, ver: o.Ver, ret: o.Ret})
			}
		}
	}
	if sh.Final != nil {
		h.final = sh.Final
	}
	if sh.Lineage != nil {
		h.lineage = sh.Lineage
	}
	if sh.Records != nil {
		h.records = sh.Records
	}
	h.kills = sh.Kills
	h.finalAt = sh.FinalAt
	// Findings made while the run went on (rows, schemas, verify) stay;
	// the checker's own are made again.
	h.f.list = append(h.f.list, sh.Findings[:min(sh.RunFindings, len(sh.Findings))]...)
	return h, &sh, nil
}
