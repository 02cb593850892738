package lab

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"replab/internal/spec"
	"replab/internal/testkit"
)

// RestoreDelayAcct undoes what a dead holder left, and only that: never
// under a live holder, never over a value someone else set since.
func TestRestoreDelayAcct(t *testing.T) {
	setup := func(t *testing.T, cur, was string) (path, dir string) {
		dir = t.TempDir()
		path = filepath.Join(dir, "task_delayacct")
		if err := os.WriteFile(path, []byte(cur+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if was != "" {
			if err := os.WriteFile(filepath.Join(dir, "delayacct.was"), []byte(was), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return path, dir
	}
	check := func(t *testing.T, path, dir, wantVal string, wantWas bool) {
		t.Helper()
		if v, _ := readProc(path); v != wantVal {
			t.Errorf("sysctl %q, want %q", v, wantVal)
		}
		if _, err := os.Stat(filepath.Join(dir, "delayacct.was")); (err == nil) != wantWas {
			t.Errorf("delayacct.was there: %v, want %v", err == nil, wantWas)
		}
	}
	t.Run("a dead holder's value comes back", func(t *testing.T) {
		path, dir := setup(t, "1", "0")
		done, err := RestoreDelayAcct(path, dir)
		if err != nil || !strings.Contains(done, `restored to "0"`) {
			t.Errorf("done %q, err %v", done, err)
		}
		check(t, path, dir, "0", false)
	})
	t.Run("a live holder keeps it on", func(t *testing.T) {
		path, dir := setup(t, "0", "")
		ok, _, release := HoldDelayAcct(path, dir)
		if !ok {
			t.Fatal("not switched on")
		}
		if done, err := RestoreDelayAcct(path, dir); done != "" || err != nil {
			t.Errorf("under a live holder: done %q, err %v", done, err)
		}
		check(t, path, dir, "1", true)
		release()
		check(t, path, dir, "0", false)
	})
	t.Run("a value set since by someone else stays", func(t *testing.T) {
		path, dir := setup(t, "0", "0")
		if done, err := RestoreDelayAcct(path, dir); done != "" || err != nil {
			t.Errorf("done %q, err %v", done, err)
		}
		check(t, path, dir, "0", false)
	})
	t.Run("nothing recorded, nothing done", func(t *testing.T) {
		path, dir := setup(t, "1", "")
		if done, err := RestoreDelayAcct(path, dir); done != "" || err != nil {
			t.Errorf("done %q, err %v", done, err)
		}
		check(t, path, dir, "1", false)
	})
}

// holdLabEnv tells the test binary, run again as a child, to be a run
// that holds a lab and the delay accounting switch until it is killed:
// "LAB:STATE_ROOT:SYSCTL:LOCK_DIR".
const holdLabEnv = "REPLAB_TEST_HOLD_LAB"

// TestHelperHoldsALabAndDelayAcct is the child: not a test on its own.
func TestHelperHoldsALabAndDelayAcct(t *testing.T) {
	args := strings.Split(os.Getenv(holdLabEnv), ":")
	if len(args) != 4 {
		t.Skip("the child of TestKilledRunIsUndoneByLabDown")
	}
	name, root, path, lockDir := args[0], args[1], args[2], args[3]
	s, err := spec.Load("../../examples/two-sites.toml")
	if err != nil {
		t.Fatal(err)
	}
	s.Lab.Name = name
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := Up(ctx, s, Options{StateRoot: root}); err != nil {
		t.Fatal(err)
	}
	if ok, note, _ := HoldDelayAcct(path, lockDir); !ok {
		t.Fatal(note)
	}
	fmt.Println("ready")
	time.Sleep(2 * time.Minute) // until killed
	t.Fatal("not killed")
}

// delayAcctHeld says whether a live monitor (of any process) holds the
// delay accounting switch shared through lockDir.
func delayAcctHeld(t *testing.T, lockDir string) bool {
	f, err := os.OpenFile(filepath.Join(lockDir, "delayacct.holders"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil
}

// TestKilledRunIsUndoneByLabDown: a process holding a lab (with its
// control socket and fault log) and the delay accounting switch, killed
// with SIGKILL as a run in its measure phase would be, leaves the sysctl
// on and its files; lab down restores the sysctl and removes the files.
// With the machine's kernel.task_delayacct (its value saved and put back;
// skipped while a replab run on the machine holds it), and with a
// stand-in file, which no other run can hold.
func TestKilledRunIsUndoneByLabDown(t *testing.T) {
	testkit.Need(t, testkit.Lab)
	t.Run("the machine's sysctl", func(t *testing.T) {
		if err := os.MkdirAll(DelayAcctLockDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if delayAcctHeld(t, DelayAcctLockDir) {
			t.Skip("a replab run on this machine holds the delay accounting switch")
		}
		orig, err := readProc(DelayAcctPath)
		if err != nil {
			t.Skip("no delay accounting sysctl: " + err.Error())
		}
		// What a dead run may have left already goes back as it was.
		was := filepath.Join(DelayAcctLockDir, "delayacct.was")
		stale, staleErr := os.ReadFile(was)
		t.Cleanup(func() {
			if delayAcctHeld(t, DelayAcctLockDir) {
				return // a run started meanwhile: it owns the switch now
			}
			if cur, _ := readProc(DelayAcctPath); cur != orig {
				_ = writeProc(DelayAcctPath, orig)
			}
			if staleErr == nil {
				_ = os.WriteFile(was, stale, 0o644)
			}
		})
		if err := writeProc(DelayAcctPath, "0"); err != nil {
			t.Fatal(err)
		}
		killedRunIsUndone(t, DelayAcctPath, DelayAcctLockDir)
	})
	t.Run("a stand-in", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "task_delayacct")
		if err := os.WriteFile(path, []byte("0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		oldPath, oldDir := delayAcctPath, delayAcctLockDir
		delayAcctPath, delayAcctLockDir = path, dir
		t.Cleanup(func() { delayAcctPath, delayAcctLockDir = oldPath, oldDir })
		killedRunIsUndone(t, path, dir)
	})
}

func killedRunIsUndone(t *testing.T, path, lockDir string) {
	name, root := uniqueName("dacct"), t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	child := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperHoldsALabAndDelayAcct$", "-test.v")
	child.Env = append(os.Environ(), holdLabEnv+"="+strings.Join([]string{name, root, path, lockDir}, ":"))
	child.Stderr = os.Stderr
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = child.Process.Kill()
		_ = child.Wait()
		_, _ = Down(context.Background(), root, name)
	})
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "ready" {
				ready <- true
				break
			}
		}
		for sc.Scan() {
		}
		close(ready)
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatal("the child exited before it was ready")
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the child was not ready within 2 minutes")
	}
	was := filepath.Join(lockDir, "delayacct.was")
	faultLog := FaultLogPath(root, name)
	if cur, _ := readProc(path); cur != "1" {
		t.Fatalf("the child did not switch delay accounting on: %q", cur)
	}
	for _, f := range []string{was, faultLog} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("before the kill: %v", err)
		}
	}
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	if cur, _ := readProc(path); cur != "1" {
		t.Fatalf("after the kill the sysctl is %q already: nothing left to test", cur)
	}

	done, err := Down(ctx, root, name)
	if err != nil {
		t.Fatalf("lab down: %v", err)
	}
	t.Logf("lab down: %s", strings.Join(done, "; "))
	if cur, _ := readProc(path); cur != "0" {
		if delayAcctHeld(t, lockDir) {
			t.Skip("a replab run started meanwhile holds the delay accounting switch")
		}
		t.Errorf("after lab down the sysctl is %q, want 0 as before the run", cur)
	}
	for _, f := range []string{was, faultLog} {
		if _, err := os.Stat(f); err == nil {
			t.Errorf("%s left after lab down", f)
		}
	}
	assertGone(t, root, name)
}
