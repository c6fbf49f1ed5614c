package codec

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func TestPartitionDir(t *testing.T) {
	cases := []struct {
		by     []string
		values []string
		nulls  []bool
		want   string // or the error's text
		err    bool
	}{
		{[]string{"region", "year"}, []string{"eu", "2025"}, []bool{false, false}, "region=eu/year=2025", false},
		{[]string{"region", "year"}, []string{"a/b c", ""}, []bool{false, true}, "region=a%2Fb%20c/year=__HIVE_DEFAULT_PARTITION__", false},
		{[]string{"a b"}, []string{"ü=1%"}, []bool{false}, "a%20b=%C3%BC%3D1%25", false},
		{[]string{"region"}, []string{""}, []bool{false}, `partition column "region" holds an empty string`, true},
		{[]string{"region"}, []string{HiveDefault}, []bool{false}, `partition column "region" holds the string "__HIVE_DEFAULT_PARTITION__", which pyarrow would read back as null`, true},
		{[]string{"region"}, []string{strings.Repeat("x", 300)}, []bool{false}, `partition value of "region" is too long`, true},
	}
	for _, c := range cases {
		dir, err := PartitionDir(c.by, c.values, c.nulls)
		if c.err {
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%v: got %q %v, want error %q", c.values, dir, err, c.want)
			}
			continue
		}
		if err != nil || dir != c.want {
			t.Errorf("%v: got %q %v, want %q", c.values, dir, err, c.want)
			continue
		}
		back, err := ParsePartitionDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for i, col := range c.by {
			want := c.values[i]
			if c.nulls[i] {
				want = HiveDefault
			}
			if back[col] != want {
				t.Errorf("%s: %s parsed back as %q, want %q", dir, col, back[col], want)
			}
		}
	}
	if _, err := ParsePartitionDir("novalue"); err == nil {
		t.Error("a segment without = parsed")
	}
}

// FuzzPartitionDir: any value either is refused or reads back as written.
func FuzzPartitionDir(f *testing.F) {
	for _, s := range []string{"eu", "a/b c", "", HiveDefault, "%41", "x=y", "..", "ü"} {
		f.Add("col", s, false)
	}
	f.Add(".", "x", false)
	f.Fuzz(func(t *testing.T, col, v string, null bool) {
		sc := schemaOf(field(col, arrow.BinaryTypes.String, true), field(col+"_", arrow.BinaryTypes.String, true))
		if CheckPartitionBy(sc, []string{col}) != nil {
			return // a name no partitioned version can have
		}
		dir, err := PartitionDir([]string{col}, []string{v}, []bool{null})
		if err != nil {
			return
		}
		if strings.Count(dir, "/") != 0 || strings.HasPrefix(dir, ".") {
			t.Fatalf("%q names more than one directory level", dir)
		}
		back, err := ParsePartitionDir(dir)
		if err != nil {
			t.Fatalf("%q: %v", dir, err)
		}
		want := v
		if null {
			want = HiveDefault
		}
		if got, ok := back[col]; !ok || got != want || len(back) != 1 {
			t.Fatalf("%q: parsed back %v, want %q=%q", dir, back, col, want)
		}
	})
}

func TestCanonicalPartValue(t *testing.T) {
	dict := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.PrimitiveTypes.Int32}
	cases := []struct {
		dt   arrow.DataType
		in   string
		want string // "" for an error
	}{
		{arrow.PrimitiveTypes.Int32, "05", "5"},
		{arrow.PrimitiveTypes.Int32, "-0", "0"},
		{arrow.PrimitiveTypes.Uint8, "+7", ""},
		{arrow.PrimitiveTypes.Int64, "x", ""},
		{arrow.FixedWidthTypes.Boolean, "TRUE", "true"},
		{arrow.FixedWidthTypes.Boolean, "yes", ""},
		{arrow.FixedWidthTypes.Date32, "2026-01-02", "2026-01-02"},
		{arrow.FixedWidthTypes.Date32, "2026-1-2", ""},
		{arrow.BinaryTypes.String, " a ", " a "},
		{dict, "007", "7"},
		{arrow.PrimitiveTypes.Int64, HiveDefault, HiveDefault},
	}
	for _, c := range cases {
		got, err := CanonicalPartValue(c.dt, c.in)
		if (c.want == "") != (err != nil) || got != c.want {
			t.Errorf("%s %q: got %q %v, want %q", c.dt, c.in, got, err, c.want)
		}
	}
}

func TestCheckPartitionBy(t *testing.T) {
	sc := schemaOf(field("id", arrow.PrimitiveTypes.Int64, true), field("f", arrow.PrimitiveTypes.Float64, true),
		field("a/b", arrow.BinaryTypes.String, true), field("day", arrow.FixedWidthTypes.Date32, true))
	for _, c := range []struct {
		by   []string
		want string
	}{
		{[]string{"nope"}, `partition column "nope" is not a column`},
		{[]string{"f"}, `partition column "f" has type float64`},
		{[]string{"id", "id"}, `partition column "id" given twice`},
		{[]string{"a/b"}, `partition column name "a/b" cannot name a directory`},
		{[]string{"id", "day", "a/b"}, `partition column name "a/b" cannot name a directory`},
		{nil, ""},
		{[]string{"id", "day"}, ""},
	} {
		err := CheckPartitionBy(sc, c.by)
		if c.want == "" {
			if err != nil {
				t.Errorf("%v: %v", c.by, err)
			}
			continue
		}
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want %q", c.by, err, c.want)
		}
	}
	one := schemaOf(field("id", arrow.PrimitiveTypes.Int64, true))
	if err := CheckPartitionBy(one, []string{"id"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("every column a partition column: %v", err)
	}
}

var partSchema = schemaOf(
	field("id", arrow.PrimitiveTypes.Int64, true),
	field("region", arrow.BinaryTypes.String, true),
	field("year", arrow.PrimitiveTypes.Int32, true),
)

// splitJSON renders parts as "dir: rows" lines.
func splitJSON(t *testing.T, parts []Part) string {
	t.Helper()
	var out []string
	for _, p := range parts {
		out = append(out, p.Dir+": "+rowsJSON(t, p.Batch))
	}
	return strings.Join(out, "\n")
}

func releaseParts(parts []Part) {
	for _, p := range parts {
		p.Batch.Release()
	}
}

func TestSplitByPartition(t *testing.T) {
	mem, ctx := checkedMem(t)
	cases := []struct {
		name string
		rows string
		by   []string
		want string
	}{
		{"interleaved", `[{"id":1,"region":"eu","year":2025},{"id":2,"region":"us","year":2025},{"id":3,"region":"eu","year":2026},
			{"id":4,"region":"a/b c","year":null},{"id":5,"region":"eu","year":2025}]`, []string{"region", "year"},
			`region=eu/year=2025: [{"id":1},{"id":5}]
region=us/year=2025: [{"id":2}]
region=eu/year=2026: [{"id":3}]
region=a%2Fb%20c/year=__HIVE_DEFAULT_PARTITION__: [{"id":4}]`},
		{"grouped already", `[{"id":1,"region":"eu","year":1},{"id":2,"region":"eu","year":1},{"id":3,"region":null,"year":1}]`, []string{"region"},
			`region=eu: [{"id":1,"year":1},{"id":2,"year":1}]
region=__HIVE_DEFAULT_PARTITION__: [{"id":3,"year":1}]`},
		{"one partition", `[{"id":1,"region":"eu","year":1},{"id":2,"region":"eu","year":2}]`, []string{"year", "region"},
			`year=1/region=eu: [{"id":1}]
year=2/region=eu: [{"id":2}]`},
		{"empty", `[]`, []string{"region"}, ``},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := batch(t, mem, partSchema, c.rows)
			defer rec.Release()
			parts, err := SplitByPartition(ctx, rec, c.by)
			if err != nil {
				t.Fatal(err)
			}
			defer releaseParts(parts)
			if got := splitJSON(t, parts); got != c.want {
				t.Fatalf("got\n%s\nwant\n%s", got, c.want)
			}
			fs := FileSchema(partSchema, c.by)
			for _, p := range parts {
				if !p.Batch.Schema().Equal(fs) {
					t.Fatalf("part schema %s, want %s", p.Batch.Schema(), fs)
				}
			}
		})
	}
}

// Rows already grouped by partition are sliced, not copied.
func TestSplitByPartitionSlicesGroupedRows(t *testing.T) {
	mem, ctx := checkedMem(t)
	rec := batch(t, mem, partSchema, `[{"id":1,"region":"eu"},{"id":2,"region":"eu"},{"id":3,"region":"us"}]`)
	defer rec.Release()
	parts, err := SplitByPartition(ctx, rec, []string{"region"})
	if err != nil {
		t.Fatal(err)
	}
	defer releaseParts(parts)
	if len(parts) != 2 || parts[1].Batch.Column(0).Data().Buffers()[1] != rec.Column(0).Data().Buffers()[1] {
		t.Fatal("grouped rows were copied")
	}
}

func TestSplitByPartitionRefusesValuesThatReadBackAsNull(t *testing.T) {
	mem, ctx := checkedMem(t)
	for _, v := range []string{"", HiveDefault} {
		rec := batch(t, mem, partSchema, fmt.Sprintf(`[{"id":1,"region":"eu"},{"id":2,"region":%q}]`, v))
		_, err := SplitByPartition(ctx, rec, []string{"region"})
		rec.Release()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `partition column "region"`) {
			t.Errorf("%q: got %v", v, err)
		}
	}
}

// Partition columns of every partitionable type, a dictionary holding a
// value twice (two codes, one directory), booleans and dates.
func TestSplitByPartitionTypes(t *testing.T) {
	mem, ctx := checkedMem(t)
	vb := array.NewStringBuilder(mem)
	vb.AppendValues([]string{"x", "y", "x"}, nil)
	vals := vb.NewArray()
	vb.Release()
	defer vals.Release()
	ib := array.NewInt8Builder(mem)
	ib.AppendValues([]int8{0, 1, 2, 0, 1}, []bool{true, true, true, false, true})
	idx := ib.NewArray()
	ib.Release()
	defer idx.Release()
	dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}
	dict := array.NewDictionaryArray(dt, idx, vals)
	defer dict.Release()
	other := batch(t, mem, schemaOf(field("b", arrow.FixedWidthTypes.Boolean, true), field("d", arrow.FixedWidthTypes.Date32, true),
		field("u", arrow.PrimitiveTypes.Uint64, true), field("n", arrow.PrimitiveTypes.Int64, true)),
		`[{"b":true,"d":"2026-01-02","u":18446744073709551615,"n":0},{"b":false,"d":"2026-01-02","u":1,"n":1},{"b":true,"d":"2026-01-02","u":18446744073709551615,"n":2},
		{"b":null,"d":null,"u":null,"n":3},{"b":false,"d":"2026-01-02","u":1,"n":4}]`)
	defer other.Release()
	sc := schemaOf(field("k", dt, true), field("b", arrow.FixedWidthTypes.Boolean, true), field("d", arrow.FixedWidthTypes.Date32, true),
		field("u", arrow.PrimitiveTypes.Uint64, true), field("n", arrow.PrimitiveTypes.Int64, true))
	rec := array.NewRecordBatch(sc, append([]arrow.Array{dict}, other.Columns()...), 5)
	defer rec.Release()
	parts, err := SplitByPartition(ctx, rec, []string{"k", "b", "d", "u"})
	if err != nil {
		t.Fatal(err)
	}
	defer releaseParts(parts)
	want := `k=x/b=true/d=2026-01-02/u=18446744073709551615: [{"n":0},{"n":2}]
k=y/b=false/d=2026-01-02/u=1: [{"n":1},{"n":4}]
k=__HIVE_DEFAULT_PARTITION__/b=__HIVE_DEFAULT_PARTITION__/d=__HIVE_DEFAULT_PARTITION__/u=__HIVE_DEFAULT_PARTITION__: [{"n":3}]`
	if got := splitJSON(t, parts); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if parts[0].Values["k"] != "x" || parts[2].Values["d"] != HiveDefault {
		t.Fatalf("values %v %v", parts[0].Values, parts[2].Values)
	}
}

// The vectorised split agrees with the row-by-row one it replaced, on
// random batches.
func TestSplitByPartitionMatchesRowByRow(t *testing.T) {
	mem, ctx := checkedMem(t)
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 20 {
		rec := benchBatch(mem, 200+r.IntN(300), 3, 1+r.IntN(12), r)
		parts, err := SplitByPartition(ctx, rec, []string{"p"})
		if err != nil {
			t.Fatal(err)
		}
		dirs, old, err := splitRowByRow(ctx, rec, []int{0}, []string{"p"})
		if err != nil {
			t.Fatal(err)
		}
		if len(dirs) != len(parts) {
			t.Fatalf("round %d: %d parts, row by row %d", round, len(parts), len(dirs))
		}
		for i, p := range parts {
			wantRows := old[i].NewSlice(0, old[i].NumRows())
			keep := make([]arrow.Array, 0, wantRows.NumCols()-1)
			keep = append(keep, wantRows.Columns()[1:]...)
			want := array.NewRecordBatch(p.Batch.Schema(), keep, wantRows.NumRows())
			if p.Dir != dirs[i] || !array.RecordEqual(p.Batch, want) {
				t.Fatalf("round %d part %d: %s %s, row by row %s %s", round, i, p.Dir, rowsJSON(t, p.Batch), dirs[i], rowsJSON(t, want))
			}
			want.Release()
			wantRows.Release()
			old[i].Release()
		}
		releaseParts(parts)
		rec.Release()
	}
}

func TestConstantColumn(t *testing.T) {
	mem, _ := checkedMem(t)
	dict := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int16, ValueType: arrow.BinaryTypes.LargeString}
	cases := []struct {
		dt   arrow.DataType
		raw  string
		want string
	}{
		{arrow.PrimitiveTypes.Int32, "-5", "[-5 -5 -5]"},
		{arrow.BinaryTypes.String, "a b", `["a b" "a b" "a b"]`},
		{arrow.FixedWidthTypes.Date32, "2026-01-02", "[2026-01-02 2026-01-02 2026-01-02]"},
		{arrow.FixedWidthTypes.Boolean, "true", "[true true true]"},
		{dict, "x", `{ dictionary: ["x"]
  indices: [0 0 0] }`},
		{arrow.PrimitiveTypes.Int64, HiveDefault, "[(null) (null) (null)]"},
	}
	for _, c := range cases {
		a, err := ConstantColumn(mem, c.dt, c.raw, 3)
		if err != nil {
			t.Fatalf("%s %q: %v", c.dt, c.raw, err)
		}
		if a.String() != c.want || !arrow.TypeEqual(a.DataType(), c.dt) {
			t.Errorf("%s %q: got %s", c.dt, c.raw, a)
		}
		a.Release()
	}
	if _, err := ConstantColumn(mem, arrow.PrimitiveTypes.Int8, "300", 1); err == nil {
		t.Error("300 became an int8")
	}
}

func ExampleSplitByPartition() {
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "region", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	rec, _, _ := array.RecordFromJSON(memory.DefaultAllocator, sc, strings.NewReader(
		`[{"id":1,"region":"eu"},{"id":2,"region":"us"},{"id":3,"region":"eu"},{"id":4,"region":null}]`))
	defer rec.Release()
	parts, err := SplitByPartition(context.Background(), rec, []string{"region"})
	if err != nil {
		panic(err)
	}
	for _, p := range parts {
		fmt.Println(p.Dir, p.Batch.Column(0))
		p.Batch.Release()
	}
	// Output:
	// region=eu [1 3]
	// region=us [2]
	// region=__HIVE_DEFAULT_PARTITION__ [4]
}

// TestConstantColumnRepeats: the repeated-bytes path builds what
// appending the value n times builds, valid, for every size.
func TestConstantColumnRepeats(t *testing.T) {
	mem, _ := checkedMem(t)
	cases := []struct {
		dt  arrow.DataType
		raw string
	}{
		{arrow.PrimitiveTypes.Int8, "-7"}, {arrow.PrimitiveTypes.Uint16, "65000"}, {arrow.PrimitiveTypes.Int64, "123456789012"},
		{arrow.FixedWidthTypes.Boolean, "false"}, {arrow.FixedWidthTypes.Boolean, "true"},
		{arrow.FixedWidthTypes.Date32, "1999-12-31"}, {arrow.FixedWidthTypes.Date64, "2000-01-01"},
		{arrow.BinaryTypes.String, "eu-west"}, {arrow.BinaryTypes.String, "ü"}, {arrow.BinaryTypes.Binary, "YmluAA=="},
		{arrow.BinaryTypes.LargeString, "large"},
	}
	for _, c := range cases {
		for _, n := range []int{0, 1, 2, 7, 8, 9, 1000, 65537} {
			a, err := ConstantColumn(mem, c.dt, c.raw, n)
			if err != nil {
				t.Fatalf("%s %q: %v", c.dt, c.raw, err)
			}
			b := array.NewBuilder(mem, c.dt)
			for i := 0; i < n; i++ {
				if err := b.AppendValueFromString(c.raw); err != nil {
					t.Fatal(err)
				}
			}
			want := b.NewArray()
			b.Release()
			if err := array.ValidateFull(a); err != nil {
				t.Errorf("%s %q x%d: invalid: %v", c.dt, c.raw, n, err)
			}
			if !array.Equal(a, want) || a.Len() != n || a.NullN() != 0 {
				t.Errorf("%s %q x%d: got %v, want %v", c.dt, c.raw, n, a, want)
			}
			a.Release()
			want.Release()
		}
	}
}

// TestTakeRowsDictionaryOfTimestamps: gathering the rows of a dictionary
// of timestamps gives a column whose type arrow.TypeEqual may find
// different from its schema's (reflect.DeepEqual, once one of two equal
// timestamp types has cached its time zone): the batch is labelled with
// the schema's types, not refused by a panic (red team round 11 r02).
func TestTakeRowsDictionaryOfTimestamps(t *testing.T) {
	ctx := context.Background()
	for _, tz := range []string{"", "UTC", "Europe/Paris"} {
		// The schema's types and the columns' are equal, other instances
		// (as a batch decoded from IPC and a version's schema are).
		schemaOf := func(ts *arrow.TimestampType) *arrow.Schema {
			dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: ts}
			return arrow.NewSchema([]arrow.Field{{Name: "p", Type: arrow.PrimitiveTypes.Int64}, {Name: "ts", Type: dt, Nullable: true}}, nil)
		}
		ts := &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: tz}
		sc := schemaOf(ts)
		colType := schemaOf(&arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: tz}).Field(1).Type.(*arrow.DictionaryType)
		vb := array.NewTimestampBuilder(memory.DefaultAllocator, colType.ValueType.(*arrow.TimestampType))
		vb.AppendValues([]arrow.Timestamp{1577836800000000, 1609459200000000, 1640995200000000}, nil)
		vals := vb.NewArray()
		vb.Release()
		ib := array.NewInt8Builder(memory.DefaultAllocator)
		ib.AppendValues([]int8{0, 1, 0, 2}, []bool{true, true, false, true})
		idx := ib.NewArray()
		ib.Release()
		dict := array.NewDictionaryArray(colType, idx, vals)
		idx.Release()
		vals.Release()
		pb := array.NewInt64Builder(memory.DefaultAllocator)
		pb.AppendValues([]int64{1, 2, 1, 1}, nil)
		ps := pb.NewArray()
		pb.Release()
		rec := array.NewRecordBatch(sc, []arrow.Array{ps, dict}, 4)
		ps.Release()
		dict.Release()
		g, err := GroupByPartition(ctx, rec, []string{"p"})
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		// Then the schema's timestamp type caches its zone; the column's
		// does not.
		if _, err := ts.GetZone(); err != nil {
			t.Fatal(err)
		}
		for _, part := range g.Parts {
			b, shared, err := TakeRows(ctx, g.Data, part.Rows)
			if err != nil {
				t.Fatalf("%q: %v", tz, err)
			}
			if part.Dir == "p=1" && (shared || b.NumRows() != 3) {
				t.Errorf("%q: part p=1: %d rows, shared %v", tz, b.NumRows(), shared)
			}
			b.Release()
		}
		g.Release()
	}
}
