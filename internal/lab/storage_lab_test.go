package lab

import (
	"os"
	"os/exec"
	"path/filepath"
	"replab/internal/testkit"
	"strings"
	"testing"
	"time"
)

// A lab with one volume of each class that runs servers; the nodes'
// engine is never started.
var storageSpec = testkit.ReadFile("testdata/storage.toml")

func requireStorageTools(t *testing.T) {
	t.Helper()
	testkit.Need(t, testkit.Storage)
}

// writeSynced writes a file with fsync into every node's directory.
func writeSynced(t *testing.T, l *Lab, nodes ...string) {
	t.Helper()
	for _, n := range nodes {
		dir, err := l.NodeDataDir(n)
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.Create(filepath.Join(dir, "f"))
		if err == nil {
			_, err = f.Write(make([]byte, 1<<20))
			if err == nil {
				err = f.Sync()
			}
			f.Close()
		}
		if err != nil {
			t.Fatalf("node %s: write on its storage: %v", n, err)
		}
	}
}

// assertStorageGone: no mount, loop device or storage process refers to dir.
func assertStorageGone(t *testing.T, dir string) {
	t.Helper()
	b, _ := os.ReadFile("/proc/mounts")
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, dir) {
			t.Errorf("still mounted: %s", line)
		}
	}
	out, _ := exec.Command("losetup", "-l", "-n", "-O", "NAME,BACK-FILE").Output()
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, dir) {
			t.Errorf("loop device still attached: %s", line)
		}
	}
	out, _ = exec.Command("ps", "-eo", "pid,args").Output()
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, dir) {
			t.Errorf("process left: %s", strings.TrimSpace(line))
		}
	}
}

// TestStorageRemovedAfterCrash: a lab killed with its volumes mounted and
// written (the emulator gone with it, so no link carries the storage's
// traffic) is removed by Down without waiting on the dead links.
func TestStorageRemovedAfterCrash(t *testing.T) {
	testkit.Need(t, testkit.Lab)
	requireStorageTools(t)
	s := specFrom(t, "stcrash", storageSpec)
	root, data := t.TempDir(), t.TempDir()
	l, err := Up(ctxFor(t, time.Minute), s, Options{StateRoot: root, DataRoot: data, NoControl: true})
	if err != nil {
		t.Fatal(err)
	}
	writeSynced(t, l, "m", "s", "n")
	l.emu.Close()
	l.rec.PID, l.rec.PIDStart = 1<<22-1, "0"
	if err := l.saveRecord(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	done, err := Down(ctxFor(t, time.Minute), root, s.Lab.Name)
	if err != nil {
		t.Fatalf("down: %v", err)
	}
	t.Logf("down removed in %.1f s: %v", time.Since(start).Seconds(), done)
	assertGone(t, root, s.Lab.Name)
	assertStorageGone(t, data)
	_ = l.Close() // what the dead process held in memory (the nas listener)
	assertStorageGone(t, data)
}

// TestStorageRemovedWhenUpFails: a volume that fails half-way (mkfs)
// leaves nothing behind, nor do the volumes made before it.
func TestStorageRemovedWhenUpFails(t *testing.T) {
	testkit.Need(t, testkit.Lab)
	requireStorageTools(t)
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "mkfs.ext4"), []byte("#!/bin/sh\necho mkfs refused by the test >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	s := specFrom(t, "stfail", storageSpec)
	root, data := t.TempDir(), t.TempDir()
	_, err := Up(ctxFor(t, time.Minute), s, Options{StateRoot: root, DataRoot: data, NoControl: true})
	if err == nil || !strings.Contains(err.Error(), "mkfs refused by the test") || !strings.Contains(err.Error(), "node s") {
		t.Fatalf("Up with a failing mkfs: %v; want an error naming node s and mkfs's message", err)
	}
	t.Logf("Up: %v", err)
	assertGone(t, root, s.Lab.Name)
	assertStorageGone(t, data)
}

// TestStorageClose: Close removes every volume, the files written on
// them reached the storage site's server.
func TestStorageClose(t *testing.T) {
	testkit.Need(t, testkit.Lab)
	requireStorageTools(t)
	s := specFrom(t, "stclose", storageSpec)
	root, data := t.TempDir(), t.TempDir()
	l, err := Up(ctxFor(t, time.Minute), s, Options{StateRoot: root, DataRoot: data, NoControl: true})
	if err != nil {
		t.Fatal(err)
	}
	writeSynced(t, l, "m", "s", "n")
	dir, _ := l.DataDir()
	if fi, err := os.Stat(filepath.Join(dir, "storage", "n", "export", "f")); err != nil || fi.Size() != 1<<20 {
		t.Errorf("the file written on the nas is not in the storage site's export: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	assertGone(t, root, s.Lab.Name)
	assertStorageGone(t, data)
}

// TestSANIOLimits: the processes of a node's site get no more than the
// san's iops, nor its bandwidth, on its block device (direct I/O, so the
// page cache does not hide it).
func TestSANIOLimits(t *testing.T) {
	testkit.Need(t, testkit.Lab)
	requireStorageTools(t)
	s := specFrom(t, "stio", `
[lab]
name = "NAME"
[site.db]
[site.store]
[[link]]
sites = ["db", "store"]
[storage.iops]
kind = "san"
site = "store"
size = "64MiB"
iops = 100
[storage.bw]
kind = "san"
site = "store"
size = "64MiB"
bandwidth = "2MiB/s"
[engine]
kind = "postgres"
[node.a]
site = "db"
role = "primary"
storage = "iops"
[node.b]
site = "db"
role = "primary"
storage = "bw"
`)
	l := up(t, s)
	dd := func(node string, args ...string) time.Duration {
		dir, err := l.NodeDataDir(node)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("dd", append([]string{"if=/dev/zero", "of=" + filepath.Join(dir, "f"), "oflag=direct"}, args...)...)
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		start := time.Now()
		if err := l.Site("db").Start(cmd); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("dd on node %s's storage: %v: %s", node, err, out.String())
		}
		return time.Since(start)
	}
	// 150 writes at 100 per second: 1.5 s; 4 MiB at 2 MiB/s: 2 s. The
	// throttle lets a short burst through at the start.
	if d := dd("a", "bs=4k", "count=150"); d < time.Second {
		t.Errorf("150 direct 4 KiB writes with iops = 100 took %v; want at least 1 s", d)
	} else {
		t.Logf("150 direct 4 KiB writes with iops = 100: %.2f s", d.Seconds())
	}
	if d := dd("b", "bs=64k", "count=64"); d < 1300*time.Millisecond {
		t.Errorf("4 MiB of direct writes with bandwidth = \"2MiB/s\" took %v; want at least 1.3 s", d)
	} else {
		t.Logf("4 MiB of direct writes with bandwidth = 2MiB/s: %.2f s", d.Seconds())
	}
	// Outside the site (the test's own cgroup) nothing is limited.
	dir, _ := l.NodeDataDir("a")
	start := time.Now()
	if out, err := exec.Command("dd", "if=/dev/zero", "of="+filepath.Join(dir, "g"), "oflag=direct", "bs=4k", "count=150").CombinedOutput(); err != nil {
		t.Fatalf("dd: %v: %s", err, out)
	}
	t.Logf("the same 150 writes from outside the site: %.2f s", time.Since(start).Seconds())
}
