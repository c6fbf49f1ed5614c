package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/quiverdb/quiver/flightserver"
)

// TestNoAuthWarningOnce: serve without an auth file warns once, in the log,
// or on stderr when the log level hides warnings.
func TestNoAuthWarningOnce(t *testing.T) {
	for _, lvl := range []zerolog.Level{zerolog.InfoLevel, zerolog.ErrorLevel} {
		var logs, stderr bytes.Buffer
		c := serveConfig{addr: "127.0.0.1:0"}
		if err := checkExposure(c, &security{}, zerolog.New(&logs).Level(lvl), &stderr); err != nil {
			t.Fatal(err)
		}
		n := strings.Count(logs.String(), "NO AUTHENTICATION") + strings.Count(stderr.String(), "NO AUTHENTICATION")
		if n != 1 {
			t.Fatalf("level %v: warned %d times:\nlog: %s\nstderr: %s", lvl, n, logs.String(), stderr.String())
		}
	}
}

func TestLimitOptions(t *testing.T) {
	base := serveConfig{maxRecv: flightserver.DefaultMaxRecvMsgSize, maxColumns: 10, maxDepth: 4, maxInflight: "1GiB", authChecks: 1, authRate: 1, authRatePerIP: 1}
	for _, c := range []struct {
		name string
		edit func(*serveConfig)
		ok   bool
	}{
		{"defaults", func(*serveConfig) {}, true},
		{"no budget", func(c *serveConfig) { c.maxInflight = "0" }, true},
		{"budget below one message", func(c *serveConfig) { c.maxInflight = "64MiB" }, false},
		{"not a size", func(c *serveConfig) { c.maxInflight = "lots" }, false},
		{"zero columns", func(c *serveConfig) { c.maxColumns = 0 }, false},
		{"zero checks", func(c *serveConfig) { c.authChecks = 0 }, false},
		{"negative rate", func(c *serveConfig) { c.authRate = -1 }, false},
		{"no connection limits", func(c *serveConfig) { c.connIdle, c.maxConns = 0, 0 }, true},
		{"negative connection idle", func(c *serveConfig) { c.connIdle = -time.Second }, false},
		{"negative connections", func(c *serveConfig) { c.maxConns = -1 }, false},
	} {
		cfg := base
		c.edit(&cfg)
		if _, err := limitOptions(cfg); (err == nil) != c.ok {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// TestStoreOptionsBounds: the store flags serve checks (red team round
// 40's f06: a negative --lock-timeout was taken without a word).
func TestStoreOptionsBounds(t *testing.T) {
	base := serveConfig{lockStale: time.Minute, lockTimeout: 10 * time.Second, compression: "zstd"}
	for _, c := range []struct {
		name string
		edit func(*serveConfig)
		ok   bool
	}{
		{"defaults", func(*serveConfig) {}, true},
		{"no lock wait", func(c *serveConfig) { c.lockTimeout = 0 }, true},
		{"negative lock wait", func(c *serveConfig) { c.lockTimeout = -time.Second }, false},
		{"zero stale limit", func(c *serveConfig) { c.lockStale = 0 }, false},
		{"negative stale limit", func(c *serveConfig) { c.lockStale = -time.Minute }, false},
		{"sweep at start-up only", func(c *serveConfig) { c.sweepEvery = 0 }, true},
		{"negative sweep interval", func(c *serveConfig) { c.sweepEvery = -time.Hour }, false},
		{"sweeps back to back", func(c *serveConfig) { c.sweepEvery = time.Nanosecond }, false},
		{"a sweep a second", func(c *serveConfig) { c.sweepEvery = time.Second }, true},
	} {
		cfg := base
		c.edit(&cfg)
		if _, err := storeOptions(cfg); (err == nil) != c.ok {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}
