package flightserver

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/quiverdb/quiver/store/ipccache"
)

// registerCache exports the IPC cache's counters (docs/operations.md):
// hits, misses, fills, evictions and corrupt entries, the bytes they
// moved, and what the cache holds.
func (m *metrics) registerCache(c *ipccache.Cache) {
	counter := func(name, help string, f func(ipccache.Stats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return float64(f(c.Stats())) })
	}
	gauge := func(name, help string, f func(ipccache.Stats) int64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help},
			func() float64 { return float64(f(c.Stats())) })
	}
	m.reg.MustRegister(
		counter("quiver_cache_hits_total", "Files a read streamed from the IPC cache.", func(s ipccache.Stats) uint64 { return s.Hits }),
		counter("quiver_cache_misses_total", "Files a read looked up in the IPC cache and decoded from Parquet.", func(s ipccache.Stats) uint64 { return s.Misses }),
		counter("quiver_cache_fills_total", "Entries written to the IPC cache.", func(s ipccache.Stats) uint64 { return s.Fills }),
		counter("quiver_cache_evictions_total", "Entries evicted from the IPC cache (least recently used).", func(s ipccache.Stats) uint64 { return s.Evictions }),
		counter("quiver_cache_corrupt_total", "Entries that failed their checks and were deleted (each was a miss).", func(s ipccache.Stats) uint64 { return s.Corrupt }),
		counter("quiver_cache_hit_bytes_total", "Bytes of IPC cache entries opened for reads.", func(s ipccache.Stats) uint64 { return s.HitBytes }),
		counter("quiver_cache_fill_bytes_total", "Bytes of IPC cache entries written.", func(s ipccache.Stats) uint64 { return s.FillBytes }),
		counter("quiver_cache_evicted_bytes_total", "Bytes of IPC cache entries evicted.", func(s ipccache.Stats) uint64 { return s.EvictedBytes }),
		gauge("quiver_cache_bytes", "Bytes the IPC cache holds.", func(s ipccache.Stats) int64 { return s.Bytes }),
		gauge("quiver_cache_entries", "Entries the IPC cache holds.", func(s ipccache.Stats) int64 { return int64(s.Entries) }),
		gauge("quiver_cache_max_bytes", "The IPC cache's size limit (--cache-size).", func(s ipccache.Stats) int64 { return s.MaxBytes }),
	)
}
