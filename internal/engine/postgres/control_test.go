package postgres

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestKillAndStartAgain: a primary killed with SIGKILL leaves no process
// and no shared memory behind and refuses clients; started again it recovers every committed
// row from its WAL, and its standby streams again. A standby stopped and
// restarted catches up.
func TestKillAndStartAgain(t *testing.T) {
	t.Parallel()
	_, c := physLab(t, "tctl", physHeader+`
[node.e1]
site = "eu"
role = "standby"
from = "p1"
`)
	ctx := ctxFor(t, 3*time.Minute)
	p1 := c.byName["p1"]
	if err := p1.exec(ctx, "", "CREATE TABLE k (id int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	if err := p1.exec(ctx, "", "INSERT INTO k SELECT generate_series(1, 100)"); err != nil {
		t.Fatal(err)
	}
	pid := p1.pid()
	// Its shared memory, which the kill must not leave behind.
	shmid, ok, err := lockFileShmid(filepath.Join(p1.dataDir, "postmaster.pid"), pid)
	if err != nil || !ok {
		t.Fatalf("no shared memory segment in postmaster.pid: %v", err)
	}
	control := dsmControlOf(shmid)
	if _, err := os.Stat(filepath.Join(dsmDir, dsmName(control))); control == 0 || err != nil {
		t.Fatalf("no dynamic shared memory control segment (handle %d): %v", control, err)
	}
	if err := c.Kill(ctx, "p1"); err != nil {
		t.Fatal(err)
	}
	var ds unix.SysvShmDesc
	if _, err := unix.SysvShmCtl(shmid, unix.IPC_STAT, &ds); err == nil {
		t.Errorf("the killed server's shared memory segment %d is still there (%d attached)", shmid, ds.Nattch)
	}
	if _, err := os.Stat(filepath.Join(dsmDir, dsmName(control))); err == nil {
		t.Errorf("the killed server's %s is still there", dsmName(control))
	}
	procs, _ := c.Processes(ctx)
	for _, p := range procs {
		if p.Node == "p1" {
			t.Errorf("process %+v of the killed node still listed", p)
		}
	}
	if (proc{pid: pid, start: ""}).alive() || startTime(pid) != "" {
		t.Errorf("postmaster %d still exists after the kill", pid)
	}
	if err := sqlOn(t, ctx, c, "p1", "SELECT 1"); err == nil {
		t.Error("a killed node answered a query")
	}
	if err := c.Kill(ctx, "p1"); err == nil {
		t.Error("killing a node that is down: no error")
	}
	if err := c.Start(ctx, "p1"); err != nil {
		t.Fatal(err)
	}
	if n := countOn(t, c, "p1", "SELECT count(*) FROM k"); n != 100 {
		t.Errorf("%d rows after crash recovery, want 100", n)
	}
	if err := c.WaitFlowing(ctx); err != nil {
		t.Fatalf("the standby does not stream from the restarted primary: %v", err)
	}

	if err := c.Stop(ctx, "e1"); err != nil {
		t.Fatal(err)
	}
	if err := p1.exec(ctx, "", "INSERT INTO k VALUES (101)"); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(ctx, "e1"); err == nil {
		t.Error("restarting a stopped node: no error (it is not running)")
	}
	if err := c.Start(ctx, "e1"); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the restarted standby catches up", func() bool {
		return countOn(t, c, "e1", "SELECT count(*) FROM k") == 101
	})
	if err := c.Restart(ctx, "e1"); err != nil {
		t.Errorf("restart of a running standby: %v", err)
	}

	// A postmaster killed alone, as a shutdown that timed out kills it:
	// its children still hold the shared memory for a moment, and the stop
	// that follows waits for them before removing it.
	e1 := c.byName["e1"]
	shmid, ok, err = lockFileShmid(filepath.Join(e1.dataDir, "postmaster.pid"), e1.pid())
	if err != nil || !ok {
		t.Fatalf("e1: no shared memory segment in postmaster.pid: %v", err)
	}
	control = dsmControlOf(shmid)
	pm := e1.proc.Load()
	_ = syscall.Kill(e1.pid(), syscall.SIGKILL)
	<-pm.exited
	e1.stop(time.Second)
	if _, err := unix.SysvShmCtl(shmid, unix.IPC_STAT, &ds); err == nil {
		t.Errorf("e1's shared memory segment %d is still there after its stop (%d attached)", shmid, ds.Nattch)
	}
	if _, err := os.Stat(filepath.Join(dsmDir, dsmName(control))); control == 0 || err == nil {
		t.Errorf("e1's dynamic shared memory control segment (handle %d) is still there", control)
	}
	if err := c.Start(ctx, "e1"); err != nil {
		t.Fatal(err)
	}

	// Paused: a query waits (its connection is accepted by the kernel, no
	// process answers); resumed, it answers; a paused node still stops.
	if err := c.Pause(ctx, "p1"); err != nil {
		t.Fatal(err)
	}
	qctx, cancel := context.WithTimeout(ctx, time.Second)
	err = sqlOn(t, qctx, c, "p1", "SELECT 1")
	cancel()
	if err == nil {
		t.Error("a paused node answered a query")
	}
	if err := c.Resume(ctx, "p1"); err != nil {
		t.Fatal(err)
	}
	if err := sqlOn(t, ctx, c, "p1", "SELECT 1"); err != nil {
		t.Errorf("after resume: %v", err)
	}
	if err := c.Pause(ctx, "e1"); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(ctx, "e1"); err != nil {
		t.Errorf("stopping a paused node: %v", err)
	}
}
