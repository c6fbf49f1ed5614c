package store

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet/compress"
)

// The writer properties behind issue 8's measurements: zstd at level 1 (as
// pyarrow), dictionaries for byte arrays only, and small pages for
// partitioned writes, which keep one writer per partition open.
func TestParquetProps(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String},
	}, nil)
	for _, partitioned := range []bool{false, true} {
		p := s.parquetProps(sc, partitioned)
		for _, col := range []string{"id", "name"} {
			path := col
			if got := p.CompressionFor(path); got != compress.Codecs.Zstd {
				t.Errorf("partitioned=%v %s: compression %v, want zstd", partitioned, col, got)
			}
			if got := p.CompressionLevelFor(path); got != 1 {
				t.Errorf("partitioned=%v %s: zstd level %d, want 1", partitioned, col, got)
			}
		}
		if p.DictionaryEnabledFor("id") || !p.DictionaryEnabledFor("name") {
			t.Errorf("partitioned=%v: dictionary should be on for strings only", partitioned)
		}
		wantPage, wantDict := int64(1<<20), int64(1<<20) // arrow-go's defaults
		if partitioned {
			wantPage, wantDict = 64<<10, 256<<10
		}
		if p.DataPageSize() != wantPage || p.DictionaryPageSizeLimit() != wantDict {
			t.Errorf("partitioned=%v: page %d dict %d, want %d %d", partitioned, p.DataPageSize(), p.DictionaryPageSizeLimit(), wantPage, wantDict)
		}
	}
}
