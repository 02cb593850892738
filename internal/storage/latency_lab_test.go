package storage_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"replab/internal/labtest"
)

// Every class under one lab; the links add no delay, so what differs is
// the storage path itself (and the san's configured delay).
const classes = `
[lab]
name = "NAME"
[site.db]
[site.store]
[[link]]
sites = ["db", "store"]
[storage.memory]
kind = "memory"
size = "64MiB"
[storage.san0]
kind = "san"
site = "store"
size = "64MiB"
[storage.san5]
kind = "san"
site = "store"
size = "64MiB"
delay = "5ms"
[storage.san5nj]
kind = "san"
site = "store"
size = "64MiB"
delay = "5ms"
journal = false
[storage.nas]
kind = "nas"
site = "store"
[engine]
kind = "postgres"
[node.local]
site = "db"
role = "primary"
[node.memory]
site = "db"
role = "primary"
storage = "memory"
[node.san0]
site = "db"
role = "primary"
storage = "san0"
[node.san5]
site = "db"
role = "primary"
storage = "san5"
[node.san5nj]
site = "db"
role = "primary"
storage = "san5nj"
[node.nas]
site = "db"
role = "primary"
storage = "nas"
`

// TestSyncWriteLatencyOrdersClasses writes 4 KiB blocks with O_DSYNC (dd
// oflag=dsync) on each class's volume: a san with a 5 ms delay per
// operation is slower than one without by at least that much, and memory
// is the fastest. The figures are logged (docs/storage.md quotes them).
func TestSyncWriteLatencyOrdersClasses(t *testing.T) {
	l := labtest.Lab(t, "stlat", classes)
	ms := map[string]float64{}
	for _, node := range []string{"local", "memory", "san0", "san5", "san5nj", "nas"} {
		dir, err := l.NodeDataDir(node)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "dsync-"+node)
		grow := syncWriteMs(t, path, 100, false)
		ms[node] = syncWriteMs(t, path, 100, true)
		t.Logf("%-6s 4 KiB O_DSYNC write: %.3f ms over written blocks, %.3f ms growing the file (%s)", node, ms[node], grow, dir)
	}
	// A synced write writes at least one block, and the server delays
	// every write by 5 ms.
	for _, node := range []string{"san5", "san5nj"} {
		if ms[node] < 5 {
			t.Errorf("%s with delay = \"5ms\": %.2f ms per synced write; want at least 5 ms", node, ms[node])
		}
	}
	for _, node := range []string{"san0", "san5", "nas"} {
		if ms["memory"] >= ms[node] {
			t.Errorf("memory (%.3f ms) is not faster than %s (%.3f ms)", ms["memory"], node, ms[node])
		}
	}
}

var ddRE = regexp.MustCompile(`copied, ([0-9.]+) s`)

// syncWriteMs is the mean time of n 4 KiB O_DSYNC writes to path: over
// blocks written before (as a database rewrites its preallocated WAL),
// or growing the file (each write changes its size too).
func syncWriteMs(t *testing.T, path string, n int, over bool) float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args := []string{"if=/dev/zero", "of=" + path, "bs=4k", "count=" + strconv.Itoa(n), "oflag=dsync"}
	if over {
		args = append(args, "conv=notrunc")
	}
	out, err := exec.CommandContext(ctx, "dd", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("dd on %s: %v: %s", path, err, out)
	}
	m := ddRE.FindSubmatch(out)
	if m == nil {
		t.Fatalf("dd said %q", out)
	}
	s, _ := strconv.ParseFloat(string(m[1]), 64)
	return s * 1000 / float64(n)
}
