package iotest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"replab/internal/enginekit"
	"replab/internal/testkit"
)

func requireFio(t *testing.T) {
	t.Helper()
	testkit.Need(t, testkit.Fio)
}

// TestProfileMeasuresEveryFigure runs the quick profile on a temporary
// directory of this machine's disk.
func TestProfileMeasuresEveryFigure(t *testing.T) {
	requireFio(t)
	dir := t.TempDir()
	started := 0
	r, err := Profile(context.Background(), dir, Options{Quick: true, Start: func(cmd *exec.Cmd) error {
		started++
		return cmd.Start()
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", *r)
	if started != 1 {
		t.Errorf("Start hook called %d times, want 1 (one fio for every job)", started)
	}
	checkResult(t, r, DefaultBlockSizes)
	if r.RuntimePerJobS != QuickRuntime.Seconds() || r.FileSizeBytes != QuickFileSizeBytes || r.Dir != dir {
		t.Errorf("recorded runtime %g s, file %d bytes, dir %s: want the quick defaults and %s", r.RuntimePerJobS, r.FileSizeBytes, r.Dir, dir)
	}
	checkEmpty(t, dir)
}

// TestProfileAsServerUser runs fio as the database servers' OS user in a
// directory that user owns, as replab iotest does.
func TestProfileAsServerUser(t *testing.T) {
	testkit.Need(t, testkit.Fio, testkit.Root)
	uid, gid, err := enginekit.ServerCredentials(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	parent, err := os.MkdirTemp("", "replab-iotest")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(parent, "node")
	if err := enginekit.MkdirOwned(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	blocks := []int{8192}
	r, err := Profile(context.Background(), dir, Options{Runtime: 500 * time.Millisecond, BlockSizes: blocks,
		FileSizeBytes: 8 << 20, User: &User{UID: uid, GID: gid}})
	if err != nil {
		t.Fatal(err)
	}
	checkResult(t, r, blocks)
	checkEmpty(t, dir)

	// The user cannot write where it does not own: fio's error is reported.
	if err := os.Chown(dir, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = Profile(context.Background(), dir, Options{Runtime: 200 * time.Millisecond, BlockSizes: blocks,
		FileSizeBytes: 1 << 20, User: &User{UID: uid, GID: gid}})
	if err == nil {
		t.Error("fio as the server user in root's directory: no error")
	} else {
		t.Logf("as expected: %v", err)
	}
}

// TestProfileStopsWhenCancelled: Ctrl-C during a profile stops fio soon
// and leaves no file behind.
func TestProfileStopsWhenCancelled(t *testing.T) {
	requireFio(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := Profile(ctx, dir, Options{Runtime: 10 * time.Second, FileSizeBytes: 4 << 20})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v, want the context's", err)
	}
	// 7 jobs of 10 s each were asked for: well under one job's time
	// means fio was stopped, not waited for.
	if d := time.Since(start); d > 9*time.Second {
		t.Errorf("Profile returned %v after the context ended", d)
	}
	checkEmpty(t, dir)
}

func TestProfileRefusesWhatIsNotADirectory(t *testing.T) {
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{f, filepath.Join(t.TempDir(), "missing")} {
		if _, err := Profile(context.Background(), d, Options{Quick: true}); err == nil {
			t.Errorf("Profile(%s): no error", d)
		}
	}
}

func checkResult(t *testing.T, r *Result, blocks []int) {
	t.Helper()
	if len(r.RandRead) != len(blocks) || len(r.RandWrite) != len(blocks) {
		t.Fatalf("random I/O at %v and %v, want %v", r.RandRead, r.RandWrite, blocks)
	}
	for i, bs := range blocks {
		for _, b := range []BlockIOPS{r.RandRead[i], r.RandWrite[i]} {
			if b.BlockBytes != bs || !(b.IOPS > 0) {
				t.Errorf("random I/O %+v, want block %d with IOPS > 0", b, bs)
			}
		}
	}
	for name, v := range map[string]float64{
		"seq read MB/s": r.SeqReadMBPerS, "seq write MB/s": r.SeqWriteMBPerS,
		"sync write iops": r.SyncWrite.IOPS, "sync write p50 ms": r.SyncWrite.P50Ms, "sync write p99 ms": r.SyncWrite.P99Ms,
	} {
		if !(v > 0) {
			t.Errorf("%s = %g, want > 0", name, v)
		}
	}
	if r.SyncWrite.P99Ms < r.SyncWrite.P50Ms {
		t.Errorf("sync write p99 %g ms < p50 %g ms", r.SyncWrite.P99Ms, r.SyncWrite.P50Ms)
	}
	if r.FioVersion == "" {
		t.Error("no fio version")
	}
}

// checkEmpty: Profile leaves nothing in the directory it measured.
func checkEmpty(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("left behind in %s: %s", dir, e.Name())
	}
}
