package reliability

// The generator of the model-based test (model_test.go): the seed, the key
// pool, the schema pool, batches whose every row can be attributed to its
// put, and operation sequences. Everything here is a function of the seed,
// so a run's operations replay exactly (the interleaving of concurrent
// clients and the moments of the kills do not).

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// modelSeedEnv replays a run: QUIVER_MODEL_SEED=<seed>.
const modelSeedEnv = "QUIVER_MODEL_SEED"

// modelSeed is the seed of this run: QUIVER_MODEL_SEED, or the clock.
func modelSeed() uint64 {
	if v := os.Getenv(modelSeedEnv); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			panic(fmt.Sprintf("%s=%q: %v", modelSeedEnv, v, err))
		}
		return n
	}
	return uint64(time.Now().UnixNano()) & (1<<53 - 1) // printable as a JSON number
}

// ---- keys -------------------------------------------------------------------

// keyKind says what the contract expects of a put to a key.
type keyKind int

const (
	// keyGood must be accepted, unless a profile above or below it exists.
	keyGood keyKind = iota
	// keyReserved must be refused with InvalidArgument by every RPC (puts,
	// reads, list-versions, compaction, retention) and change nothing.
	keyReserved
)

func (k keyKind) String() string {
	return [...]string{"good", "reserved"}[k]
}

// reservedRe: the names the layout uses itself, in any case.
var reservedRe = regexp.MustCompile(`(?i)^(v[0-9]+|[0-9]+\.(parquet|csv)|manifest\.json|manifest\.json\.write_lock)$`)

// reservedWhy says why the server must refuse the profile path p
// (docs/architecture.md, "Profiles and keys"), or "" if it must accept it:
// an empty, "." or ".." key; a key that is a name of the layout (vN,
// N.parquet, N.csv, manifest.json, manifest.json.write_lock; any case),
// starts with '.', holds '=', '\\' or a control character, is longer than
// 255 bytes or not UTF-8; more than 32 keys; a path longer than 1024 bytes.
func reservedWhy(p string) string {
	keys := keySplit(p)
	if len(keys) > 32 {
		return "more than 32 keys"
	}
	if len(p) > 1024 {
		return "a path longer than 1024 bytes"
	}
	for _, k := range keys {
		switch {
		case k == "" || k == "." || k == "..":
			return fmt.Sprintf("key %q", k)
		case len(k) > 255:
			return "a key longer than 255 bytes"
		case !utf8.ValidString(k):
			return "a key that is not UTF-8"
		case strings.HasPrefix(k, "."):
			return "a hidden key (starts with '.')"
		case strings.ContainsAny(k, "=\\"):
			return "a key holding '=' or '\\'"
		case strings.IndexFunc(k, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0:
			return "a key holding a control character"
		case reservedRe.MatchString(k):
			return fmt.Sprintf("key %q is a name of the layout", k)
		case strings.Contains(k, "e\u0301"):
			// (The pool's one decomposed spelling: é as e and a combining
			// acute, which NFC composes.)
			return "a key not in Unicode normalization form C"
		}
	}
	return ""
}

// keySpec is one entry of the key pool.
type keySpec struct {
	path   string
	kind   keyKind
	why    string
	weight int
}

// keyPool: sane names, names that nest into each other, names that collide
// with the layout's own (vN, manifest.json, lock, claim, temp) in any
// case, unicode, 255-byte keys and paths around the 1024-byte limit. A
// profile name here is the slash-joined keys. TestModelKeyPool checks each
// kind against reservedWhy.
func keyPool() []keySpec {
	long255 := strings.Repeat("k", 255)
	uni255 := strings.Repeat("é", 127) + "x" // 255 bytes of UTF-8
	var deep []string
	for i := 0; i < 20; i++ {
		deep = append(deep, fmt.Sprintf("%02d", i)+strings.Repeat("d", 200))
	}
	p1024 := strings.Join([]string{strings.Repeat("P", 255), strings.Repeat("p", 255), strings.Repeat("p", 255), strings.Repeat("p", 254), "q"}, "/")
	p1025 := strings.Join([]string{strings.Repeat("Q", 255), strings.Repeat("q", 255), strings.Repeat("q", 255), strings.Repeat("q", 255), "q"}, "/")
	return []keySpec{
		{"events", keyGood, "sane", 10},
		{"sales/orders", keyGood, "sane, two keys", 10},
		{"m/one", keyGood, "sane sibling", 8},
		{"m/two", keyGood, "sane sibling", 8},
		{"Events", keyGood, "differs from events only in case", 3},
		{"données/été", keyGood, "unicode", 4},
		{"日本/表🐟", keyGood, "unicode, astral plane", 3},
		{"\u00e9t\u00e9", keyGood, "NFC", 2},
		{"e\u0301te\u0301", keyReserved, "NFD of the NFC name: refused, it would list as été", 2},
		{"with space/and-dash_", keyGood, "spaces", 2},
		{long255, keyGood, "255-byte key", 3},
		{"u/" + uni255, keyGood, "255-byte unicode key", 2},
		{p1024, keyGood, "a 1024-byte path", 1},
		{"v", keyGood, "v without digits", 2},
		{"vx/v1a", keyGood, "version-like but not vN", 2},
		{"manifest", keyGood, "manifest without .json", 1},
		{"x", keyGood, "parent of the layout-named keys x/…", 3},
		{"tmp/foo.tmp", keyGood, "temp-like name", 1},
		{"tmp/0.parquet.tmp", keyGood, "data-file-like name with a suffix", 1},
		{"tmp/v1.csv", keyGood, "version-like, data-file-like", 1},
		{"manifest.json.tmp", keyGood, "manifest-temp-like name", 1},
		// Nesting: whichever of a family is created first wins, the rest
		// must be refused (InvalidArgument or FailedPrecondition).
		{"a", keyGood, "nests: a, a/b, a/b/c", 3},
		{"a/b", keyGood, "nests: a, a/b, a/b/c", 3},
		{"a/b/c", keyGood, "nests: a, a/b, a/b/c", 2},
		{"n", keyGood, "nests: n, n/m", 2},
		{"n/m", keyGood, "nests: n, n/m", 2},
		{"events/sub", keyGood, "nests under events", 1},
		{"sales", keyGood, "above sales/orders", 1},
		// Reserved: the layout's own names (any case), and invalid keys.
		{"v0", keyReserved, "version directory name", 2},
		{"a/v1", keyReserved, "version directory name under a", 2},
		{"events/v1", keyReserved, "version directory name under events", 2},
		{"n/v0", keyReserved, "version directory name under n", 2},
		{"r/v01", keyReserved, "parses as version directory v1", 1},
		{"V1/v1a", keyReserved, "a version directory name in another case (case-insensitive file systems)", 2},
		{"x/V7", keyReserved, "a version directory name in another case", 1},
		{"manifest.json", keyReserved, "the manifest's name", 2},
		{"events/manifest.json", keyReserved, "the manifest's name", 1},
		{"x/Manifest.JSON", keyReserved, "the manifest's name in another case", 1},
		{"x/manifest.json.write_lock", keyReserved, "the lock's name", 2},
		{"x/MANIFEST.JSON.WRITE_LOCK", keyReserved, "the lock's name in another case", 1},
		{"x/0.parquet", keyReserved, "a data file's name", 1},
		{"x/1.csv", keyReserved, "a data file's name", 1},
		{"x/12.PARQUET", keyReserved, "a data file's name in another case", 1},
		{"x/.requests", keyReserved, "hidden name", 1},
		{"x/.1.parquet.claim", keyReserved, "claim name", 1},
		{"x/.0.commit.json", keyReserved, "commit record name", 1},
		{".tmp-1", keyReserved, "temp name", 1},
		{"a/./b", keyReserved, "dot key", 1},
		{"a/../b", keyReserved, "dot-dot key", 1},
		{"sales//orders", keyReserved, "empty key", 1},
		{strings.Repeat("k", 256), keyReserved, "256-byte key", 1},
		{p1025, keyReserved, "a 1025-byte path", 1},
		{strings.Join(deep, "/"), keyReserved, "a 4 KiB path", 1},
		{"x/y=z", keyReserved, "'=' (hive)", 1},
		{"tab\tkey", keyReserved, "control character", 1},
		{"x/del\x7fkey", keyReserved, "DEL", 1},
		{`back\slash`, keyReserved, "backslash", 1},
	}
}

// modelKeys is the key pool, built once.
var modelKeys = keyPool()

// keySplit splits a profile name into keys the way the server does.
func keySplit(p string) []string { return strings.Split(p, "/") }

// nestedPair says whether one profile lies inside the other (a proper
// prefix by components).
func nestedPair(p, q string) bool {
	if p == q {
		return false
	}
	a, b := keySplit(p), keySplit(q)
	if len(a) > len(b) {
		a, b = b, a
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// ---- schemas ----------------------------------------------------------------

// family is one schema of the pool. Families have pairwise different column
// sets, so an append of one family to a version of another must be refused;
// pid (the put) and rn (the row within the put) attribute every row.
type family struct {
	name     string
	schema   *arrow.Schema
	nonNull  string // a top-level non-nullable column (besides pid/rn) for the null-in-non-nullable op
	partCols []string
}

var (
	tsType  = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "Europe/Paris"}
	idField = []arrow.Field{
		{Name: "pid", Type: arrow.PrimitiveTypes.Int64},
		{Name: "rn", Type: arrow.PrimitiveTypes.Int32},
	}
)

func famSchema(fields ...arrow.Field) *arrow.Schema {
	return arrow.NewSchema(append(append([]arrow.Field(nil), idField...), fields...), nil)
}

// families is the schema pool: ints, strings, nested, wide, partitionable,
// temporal.
var families = func() []family {
	var wide []arrow.Field
	types := []arrow.DataType{arrow.PrimitiveTypes.Int64, arrow.BinaryTypes.String, arrow.PrimitiveTypes.Float64, arrow.FixedWidthTypes.Boolean}
	for i := 0; i < 150; i++ {
		wide = append(wide, arrow.Field{Name: fmt.Sprintf("c%03d", i), Type: types[i%len(types)], Nullable: true})
	}
	wide = append(wide, arrow.Field{Name: "c150", Type: arrow.PrimitiveTypes.Int64})
	return []family{
		{name: "ints", nonNull: "y", schema: famSchema(
			arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
			arrow.Field{Name: "y", Type: arrow.PrimitiveTypes.Int32},
			arrow.Field{Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true})},
		{name: "strs", nonNull: "t", schema: famSchema(
			arrow.Field{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
			arrow.Field{Name: "t", Type: arrow.BinaryTypes.String},
			arrow.Field{Name: "bin", Type: arrow.BinaryTypes.Binary, Nullable: true})},
		{name: "nested", nonNull: "ns", schema: famSchema(
			arrow.Field{Name: "st", Type: arrow.StructOf(
				arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
				arrow.Field{Name: "b", Type: arrow.BinaryTypes.String, Nullable: true}), Nullable: true},
			arrow.Field{Name: "ns", Type: arrow.StructOf(
				arrow.Field{Name: "k", Type: arrow.PrimitiveTypes.Int64})},
			arrow.Field{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true})},
		{name: "wide", nonNull: "c150", schema: famSchema(wide...)},
		{name: "part", nonNull: "v", partCols: []string{"region", "day"}, schema: famSchema(
			arrow.Field{Name: "region", Type: arrow.BinaryTypes.String, Nullable: true},
			arrow.Field{Name: "day", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
			arrow.Field{Name: "v", Type: arrow.PrimitiveTypes.Float64})},
		{name: "time", nonNull: "ok", schema: famSchema(
			arrow.Field{Name: "ts", Type: tsType, Nullable: true},
			arrow.Field{Name: "d", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
			arrow.Field{Name: "ok", Type: arrow.FixedWidthTypes.Boolean})},
	}
}()

// famPart is the index of the partitionable family.
const famPart = 4

// reversed is the family's schema with its columns in reverse order: an
// append in another column order must be reordered, not refused.
func reversed(sc *arrow.Schema) *arrow.Schema {
	fs := sc.Fields()
	out := make([]arrow.Field, len(fs))
	for i, f := range fs {
		out[len(fs)-1-i] = f
	}
	return arrow.NewSchema(out, nil)
}

// regionValues are the partition values of "region" (nil: null). They
// include names that must be escaped in a hive directory.
var regionValues = []*string{sp("eu"), sp("us"), nil, sp("a/b"), sp("x=y"), sp("ü"), sp(".."), sp("%2F"), sp(" sp"), sp("")}

func sp(s string) *string { return &s }

// ---- batches ----------------------------------------------------------------

// putData is what one put sends: its batches, and per row its canonical
// encoding and its region (for partition-filtered reads).
type putData struct {
	schema  *arrow.Schema
	batches []arrow.RecordBatch
	rows    []string  // canonical row encodings, by rn
	regions []*string // region per rn (family part only)
}

func (d *putData) release() {
	for _, b := range d.batches {
		b.Release()
	}
}

// dataSpec says how to build a put's batches.
type dataSpec struct {
	pid     int64
	fam     int
	rows    int
	batches int
	reorder bool
	seed    uint64
	// bad: "" (valid), "null-top" (a null in a non-nullable top-level
	// column), "null-child" (a null in a non-nullable struct child of a
	// valid struct), "hive-default" (region "__HIVE_DEFAULT_PARTITION__"),
	// "dup-columns" (two columns named x).
	bad string
	// regions restricts region values (nil: all of regionValues).
	regions []*string
}

// buildPut builds the batches of a put; deterministic in spec.
func buildPut(spec dataSpec) *putData {
	r := rand.New(rand.NewPCG(spec.seed, uint64(spec.pid)))
	fam := families[spec.fam]
	sc := fam.schema
	if spec.bad == "dup-columns" {
		sc = arrow.NewSchema(append(sc.Fields(), arrow.Field{Name: sc.Field(2).Name, Type: sc.Field(2).Type, Nullable: true}), nil)
	}
	if spec.reorder {
		sc = reversed(sc)
	}
	badRow := -1
	if spec.bad == "null-top" || spec.bad == "null-child" || spec.bad == "hive-default" {
		badRow = r.IntN(spec.rows)
	}
	d := &putData{schema: sc}
	nb := max(1, min(spec.batches, spec.rows))
	per := spec.rows / nb
	rn := 0
	for bi := 0; bi < nb; bi++ {
		n := per
		if bi == nb-1 {
			n = spec.rows - rn
		}
		b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
		for i := 0; i < n; i++ {
			var region *string
			for ci, f := range sc.Fields() {
				fb := b.Field(ci)
				switch {
				case f.Name == "pid":
					fb.(*array.Int64Builder).Append(spec.pid)
				case f.Name == "rn":
					fb.(*array.Int32Builder).Append(int32(rn))
				case rn == badRow && spec.bad == "null-top" && f.Name == fam.nonNull:
					fb.AppendNull()
				case rn == badRow && spec.bad == "null-child" && f.Name == "ns":
					sb := fb.(*array.StructBuilder)
					sb.Append(true)
					sb.FieldBuilder(0).AppendNull()
				case f.Name == "region":
					vals := regionValues
					if spec.regions != nil {
						vals = spec.regions
					}
					region = vals[r.IntN(len(vals))]
					if rn == badRow && spec.bad == "hive-default" {
						region = sp("__HIVE_DEFAULT_PARTITION__")
					}
					if region == nil {
						fb.AppendNull()
					} else {
						fb.(*array.StringBuilder).Append(*region)
					}
				case f.Name == "day":
					if x := r.IntN(4); x == 3 {
						fb.AppendNull()
					} else {
						fb.(*array.Int64Builder).Append([]int64{1, 2, -1}[x])
					}
				default:
					appendRandom(r, fb, f.Type, f.Nullable)
				}
			}
			d.regions = append(d.regions, region)
			rn++
		}
		rec := b.NewRecordBatch()
		b.Release()
		for i := 0; i < int(rec.NumRows()); i++ {
			d.rows = append(d.rows, canonRow(rec, i))
		}
		d.batches = append(d.batches, rec)
	}
	return d
}

var (
	nastyStrings = []string{"", "a", "ü日本🐟", "with\x00nul", "null", "NULL", "__HIVE_DEFAULT_PARTITION__", "line\nbreak", strings.Repeat("x", 1000), "'\"\\"}
	nastyInts    = []int64{0, 1, -1, math.MaxInt64, math.MinInt64, 42}
	nastyFloats  = []float64{0, math.Copysign(0, -1), 1.5, math.NaN(), math.Inf(1), math.Inf(-1), math.MaxFloat64, math.SmallestNonzeroFloat64}
)

// appendRandom appends one random value (null with probability 1/6 when
// nullable) of typ to b.
func appendRandom(r *rand.Rand, b array.Builder, typ arrow.DataType, nullable bool) {
	if nullable && r.IntN(6) == 0 {
		b.AppendNull()
		return
	}
	switch bb := b.(type) {
	case *array.Int64Builder:
		if r.IntN(2) == 0 {
			bb.Append(nastyInts[r.IntN(len(nastyInts))])
		} else {
			bb.Append(r.Int64() - math.MaxInt64/2)
		}
	case *array.Int32Builder:
		bb.Append([]int32{0, 1, -1, math.MaxInt32, math.MinInt32, r.Int32()}[r.IntN(6)])
	case *array.Float64Builder:
		if r.IntN(2) == 0 {
			bb.Append(nastyFloats[r.IntN(len(nastyFloats))])
		} else {
			bb.Append(r.NormFloat64() * 1e6)
		}
	case *array.StringBuilder:
		if r.IntN(2) == 0 {
			bb.Append(nastyStrings[r.IntN(len(nastyStrings))])
		} else {
			bb.Append(strconv.FormatUint(r.Uint64(), 36))
		}
	case *array.BinaryBuilder:
		n := r.IntN(12)
		v := make([]byte, n)
		for i := range v {
			v[i] = byte(r.IntN(256))
		}
		bb.Append(v)
	case *array.BooleanBuilder:
		bb.Append(r.IntN(2) == 0)
	case *array.TimestampBuilder:
		bb.Append(arrow.Timestamp([]int64{0, -1, 1_700_000_000_123_456, 253402300799_000_000, r.Int64N(4e15)}[r.IntN(5)]))
	case *array.Date32Builder:
		bb.Append(arrow.Date32([]int32{0, -1, 19_000, 2_932_896, r.Int32N(50_000)}[r.IntN(5)]))
	case *array.StructBuilder:
		st := typ.(*arrow.StructType)
		bb.Append(true)
		for i, f := range st.Fields() {
			appendRandom(r, bb.FieldBuilder(i), f.Type, f.Nullable)
		}
	case *array.ListBuilder:
		lt := typ.(*arrow.ListType)
		bb.Append(true)
		for i, n := 0, r.IntN(4); i < n; i++ {
			appendRandom(r, bb.ValueBuilder(), lt.Elem(), true)
		}
	default:
		panic(fmt.Sprintf("appendRandom: no generator for %T", b))
	}
}

// canonValue encodes one value so that equal values (of any width or
// column order) encode equally: NaN as "NaN", floats by their bits,
// everything else as the JSON of its Go value.
func canonValue(a arrow.Array, i int) string {
	if a.IsNull(i) {
		return "null"
	}
	switch c := a.(type) {
	case *array.Float64:
		v := c.Value(i)
		if math.IsNaN(v) {
			return "NaN"
		}
		return "f" + strconv.FormatUint(math.Float64bits(v), 16)
	case *array.Float32:
		v := float64(c.Value(i))
		if math.IsNaN(v) {
			return "NaN"
		}
		return "f" + strconv.FormatUint(math.Float64bits(v), 16)
	case *array.Timestamp:
		return "ts" + strconv.FormatInt(int64(c.Value(i)), 10) + c.DataType().(*arrow.TimestampType).TimeZone
	case *array.Date32:
		return "d" + strconv.FormatInt(int64(c.Value(i)), 10)
	case *array.Dictionary:
		return canonValue(c.Dictionary(), c.GetValueIndex(i))
	case *array.Binary:
		// (Value is a nil slice when the batch holds no bytes at all,
		// which JSON would spell null.)
		return strconv.Quote(string(c.Value(i)))
	case *array.LargeBinary:
		return strconv.Quote(string(c.Value(i)))
	}
	b, err := json.Marshal(a.GetOneForMarshal(i))
	if err != nil {
		return fmt.Sprintf("unencodable(%v)", err)
	}
	return string(b)
}

// canonRow encodes row i of rec as name=value pairs sorted by name.
func canonRow(rec arrow.RecordBatch, i int) string {
	type kv struct{ k, v string }
	var kvs []kv
	for ci, f := range rec.Schema().Fields() {
		kvs = append(kvs, kv{f.Name, canonValue(rec.Column(ci), i)})
	}
	sort.Slice(kvs, func(a, b int) bool { return kvs[a].k < kvs[b].k })
	var sb strings.Builder
	for _, e := range kvs {
		sb.WriteString(e.k)
		sb.WriteByte('=')
		sb.WriteString(e.v)
		sb.WriteByte(';')
	}
	return sb.String()
}

// ---- operations -------------------------------------------------------------

// Operation kinds.
const (
	opAppend  = "append"  // DoPut append (request_id = the put's id)
	opWrite   = "write"   // DoPut mode write, maybe partitioned
	opRead    = "read"    // read the latest version (several ways)
	opReadV   = "readv"   // read one version
	opLatest  = "latest"  // list-versions: the latest version and its rows
	opCompact = "compact" // compact action
	opRetain  = "retain"  // remove-old-versions, grace 0
	opSweep   = "sweep"   // sweep of things older than an hour (touches nothing live)
	opCancel  = "cancel"  // a put abandoned mid-stream: must commit nothing
	opDup     = "dup"     // resend an earlier put (same request_id, same rows)
	opBad     = "bad"     // a put that must be refused with InvalidArgument
	opList    = "list"    // ListFlights
	opLineage = "lineage" // lineage action (check phase only)
	opBadKey  = "badkey"  // a call other than DoPut (Mode) with a reserved key: InvalidArgument
)

// genOp is one generated operation.
type genOp struct {
	Kind    string   `json:"kind"`
	Path    string   `json:"path,omitempty"`
	Fam     int      `json:"fam"`
	Reorder bool     `json:"reorder,omitempty"`
	PartBy  []string `json:"partition_by,omitempty"`
	Rows    int      `json:"rows,omitempty"`
	Batches int      `json:"batches,omitempty"`
	Bad     string   `json:"bad,omitempty"`
	Mode    string   `json:"mode,omitempty"` // of a bad put; the call of a badkey op
	Keep    int      `json:"keep,omitempty"`
	Read    string   `json:"read,omitempty"` // info, json, bare, cols, part
	Seed    uint64   `json:"seed"`
	Burst   int      `json:"burst,omitempty"` // > 0: starts with the other clients' ops of the same burst
}

// genConfig sizes a run.
type genConfig struct {
	Servers       int
	Clients       int
	Phases        int
	OpsPerPhase   int
	KillsPerPhase int
	MaxRows       int
	CheckTimeout  time.Duration // porcupine, per profile
}

// generator produces each phase's operations from the seed.
type generator struct {
	r      *rand.Rand
	pool   []keySpec
	good   []keySpec
	bad    []keySpec
	famOf  map[string]int // the family the generator last wrote to a key
	hot    []keySpec      // this phase's contended keys (nil: none)
	fresh  int
	bursts int
	cfg    genConfig
}

func newGenerator(seed uint64, cfg genConfig) *generator {
	g := &generator{r: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)), pool: modelKeys, famOf: map[string]int{}, cfg: cfg}
	for _, k := range g.pool {
		if k.kind == keyReserved {
			g.bad = append(g.bad, k)
		} else {
			g.good = append(g.good, k)
		}
	}
	return g
}

func (g *generator) pickKey(ks []keySpec) string {
	if len(g.hot) > 0 && len(ks) > 0 && ks[0].kind != keyReserved && g.r.IntN(10) < 7 {
		ks = g.hot
	}
	total := 0
	for _, k := range ks {
		total += k.weight
	}
	n := g.r.IntN(total)
	for _, k := range ks {
		if n < k.weight {
			return k.path
		}
		n -= k.weight
	}
	panic("unreachable")
}

// famFor is the family a put to path will use: mostly the one last
// written there (appends that fit), sometimes another (refused appends, new
// schemas by write).
func (g *generator) famFor(path string, write bool) int {
	f, ok := g.famOf[path]
	p := 0.1
	if write {
		p = 0.25
	}
	if !ok || g.r.Float64() < p {
		f = g.r.IntN(len(families))
		if families[f].name == "wide" && g.r.IntN(2) == 0 { // wide is slow; halve it
			f = 0
		}
	}
	if write || !ok {
		g.famOf[path] = f
	}
	return f
}

func (g *generator) rows() int {
	if g.r.IntN(10) == 0 {
		return 50 + g.r.IntN(4*g.cfg.MaxRows)
	}
	return 1 + g.r.IntN(g.cfg.MaxRows)
}

// phase returns one operation list per client. Bursts put one op in every
// client's list at the same position. Every other phase most operations go
// to two or three keys, so that writes, appends, compactions and
// retentions of one profile race.
func (g *generator) phase(ph int) [][]genOp {
	out := make([][]genOp, g.cfg.Clients)
	g.hot = nil
	if ph%2 == 1 {
		for i := 0; i < 2+g.r.IntN(2); i++ {
			g.hot = append(g.hot, g.good[g.r.IntN(6)]) // among the sane keys
		}
	}
	per := g.cfg.OpsPerPhase / g.cfg.Clients
	burstAt := map[int]bool{}
	for i := 0; i < 1+g.r.IntN(2); i++ {
		burstAt[g.r.IntN(max(per, 1))] = true
	}
	for step := 0; step < per; step++ {
		if burstAt[step] {
			for c, op := range g.burst(ph) {
				out[c] = append(out[c], op)
			}
			continue
		}
		for c := range out {
			out[c] = append(out[c], g.one())
		}
	}
	return out
}

// burst: every client starts an op at once on a fresh profile: first
// appends (must converge on one version), first writes (distinct versions,
// the highest latest), or creations of a profile and a profile inside it
// (exactly one may exist).
func (g *generator) burst(ph int) []genOp {
	g.bursts++
	g.fresh++
	base := fmt.Sprintf("fresh/p%d-%d", ph, g.fresh)
	kind := []string{"appends", "appends", "writes", "nested"}[g.r.IntN(4)]
	fam := g.r.IntN(len(families))
	if families[fam].name == "wide" {
		fam = 1
	}
	g.famOf[base] = fam
	var ops []genOp
	for c := 0; c < g.cfg.Clients; c++ {
		op := genOp{Kind: opAppend, Path: base, Fam: fam, Rows: 1 + g.r.IntN(g.cfg.MaxRows), Batches: 1 + g.r.IntN(2), Seed: g.r.Uint64(), Burst: g.bursts}
		switch kind {
		case "writes":
			op.Kind = opWrite
		case "nested":
			if c%2 == 1 {
				op.Path = base + "/child"
				g.famOf[op.Path] = fam
			}
		}
		ops = append(ops, op)
	}
	return ops
}

// one generates a single operation.
func (g *generator) one() genOp {
	op := genOp{Seed: g.r.Uint64()}
	w := []struct {
		kind string
		w    int
	}{{opAppend, 34}, {opWrite, 9}, {opRead, 16}, {opReadV, 6}, {opLatest, 5}, {opCompact, 3}, {opRetain, 3},
		{opSweep, 1}, {opCancel, 3}, {opDup, 4}, {opBad, 10}, {opList, 2}, {opBadKey, 2}}
	total := 0
	for _, e := range w {
		total += e.w
	}
	n := g.r.IntN(total)
	for _, e := range w {
		if n < e.w {
			op.Kind = e.kind
			break
		}
		n -= e.w
	}
	switch op.Kind {
	case opAppend, opCancel:
		op.Path = g.pickKey(g.good)
		op.Fam = g.famFor(op.Path, false)
		op.Rows, op.Batches = g.rows(), 1+g.r.IntN(3)
		op.Reorder = g.r.IntN(8) == 0
		if op.Kind == opCancel {
			op.Batches = max(op.Batches, 2)
			op.Rows = max(op.Rows, 2)
		}
	case opWrite:
		op.Path = g.pickKey(g.good)
		op.Fam = g.famFor(op.Path, true)
		op.Rows, op.Batches = g.rows(), 1+g.r.IntN(3)
		if op.Fam == famPart {
			op.PartBy = [][]string{nil, {"region"}, {"region"}, {"day"}, {"region", "day"}}[g.r.IntN(5)]
		}
	case opRead:
		op.Path = g.pickKey(g.good)
		op.Read = []string{"info", "info", "json", "bare", "cols", "part"}[g.r.IntN(6)]
	case opReadV, opLatest, opCompact:
		op.Path = g.pickKey(g.good)
	case opRetain:
		op.Path = g.pickKey(g.good)
		op.Keep = 1 + g.r.IntN(3)
	case opBad:
		g.badOp(&op)
	case opBadKey:
		op.Path = g.pickKey(g.bad)
		op.Mode = badKeyRPCs[g.r.IntN(len(badKeyRPCs))]
	}
	return op
}

// badOp fills in a put that must be refused with InvalidArgument.
func (g *generator) badOp(op *genOp) {
	op.Kind = opBad
	op.Rows, op.Batches = 1+g.r.IntN(g.cfg.MaxRows), 1+g.r.IntN(2)
	op.Mode = []string{"append", "write"}[g.r.IntN(2)]
	op.Path = g.pickKey(g.good)
	op.Fam = g.famFor(op.Path, false)
	switch x := g.r.IntN(8); x {
	case 0, 1:
		op.Bad = "reserved-key"
		op.Path = g.pickKey(g.bad)
	case 2:
		op.Bad = "null-top"
	case 3:
		op.Bad = "null-child"
		op.Fam = 2
	case 4:
		op.Bad = "hive-default"
		op.Mode, op.Fam, op.PartBy = "write", famPart, []string{"region"}
	case 5:
		op.Bad = "dup-columns"
	case 6:
		op.Bad = "partby-unknown"
		op.Mode, op.PartBy = "write", []string{"no_such_column"}
	case 7:
		op.Bad = "bad-offsets"
		op.Fam = 1
	}
}
