package fsys_test

import (
	"fmt"
	"testing"

	"github.com/quiverdb/quiver/store/fsys"
)

// The benchmarks run on both resolvers; the create ones are dominated by
// fsync, the read ones by system calls.

func benchLocal(b *testing.B, walk bool) *fsys.Local {
	b.Helper()
	return newLocal(b, walk)
}

func benchResolvers(b *testing.B, fn func(b *testing.B, l *fsys.Local)) {
	for _, res := range resolvers() {
		b.Run(res.name, func(b *testing.B) { fn(b, benchLocal(b, res.walk)) })
	}
}

func benchNames(n int, dir string) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s/%08d.rec", dir, i)
	}
	return names
}

func BenchmarkCreateExclusive(b *testing.B) {
	data := make([]byte, 200)
	benchResolvers(b, func(b *testing.B, l *fsys.Local) {
		ctx := b.Context()
		if err := l.Mkdir(ctx, "p/v1"); err != nil {
			b.Fatal(err)
		}
		names := benchNames(b.N, "p/v1")
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			if err := l.CreateExclusive(ctx, names[i], data); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkCreateCommit(b *testing.B) {
	const size, piece = 20 << 10, 1 << 10
	data := make([]byte, size)
	benchResolvers(b, func(b *testing.B, l *fsys.Local) {
		ctx := b.Context()
		if err := l.Mkdir(ctx, "p/v1"); err != nil {
			b.Fatal(err)
		}
		names := benchNames(b.N, "p/v1")
		b.SetBytes(size)
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			w, err := l.Create(ctx, names[i])
			if err != nil {
				b.Fatal(err)
			}
			// In pieces, as an encoder writes.
			for off := 0; off < size; off += piece {
				if _, err := w.Write(data[off : off+piece]); err != nil {
					b.Fatal(err)
				}
			}
			if err := w.Commit(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkReadFile(b *testing.B) {
	for _, size := range []int{1 << 10, 20 << 10} {
		b.Run(fmt.Sprintf("%dKB", size>>10), func(b *testing.B) {
			benchResolvers(b, func(b *testing.B, l *fsys.Local) {
				ctx := b.Context()
				if err := l.CreateExclusive(ctx, "p/v1/manifest", make([]byte, size)); err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(size))
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					if _, _, err := l.ReadFile(ctx, "p/v1/manifest"); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

func BenchmarkStat(b *testing.B) {
	benchResolvers(b, func(b *testing.B, l *fsys.Local) {
		ctx := b.Context()
		if err := l.CreateExclusive(ctx, "p/v1/obj", []byte("x")); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if _, err := l.Stat(ctx, "p/v1/obj"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkOpenReadAt(b *testing.B) {
	benchResolvers(b, func(b *testing.B, l *fsys.Local) {
		ctx := b.Context()
		if err := l.CreateExclusive(ctx, "p/v1/0.parquet", make([]byte, 64<<10)); err != nil {
			b.Fatal(err)
		}
		buf := make([]byte, 8<<10)
		b.SetBytes(int64(len(buf)))
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			f, err := l.Open(ctx, "p/v1/0.parquet")
			if err != nil {
				b.Fatal(err)
			}
			if _, err := f.ReadAt(buf, f.Size()-int64(len(buf))); err != nil {
				b.Fatal(err)
			}
			if err := f.Close(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkList(b *testing.B) {
	const n = 3000
	benchResolvers(b, func(b *testing.B, l *fsys.Local) {
		ctx := b.Context()
		for _, name := range benchNames(n, "p/log") {
			if err := l.CreateExclusive(ctx, name, nil); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			entries, err := l.List(ctx, "p/log")
			if err != nil || len(entries) != n {
				b.Fatal(len(entries), err)
			}
		}
	})
}
