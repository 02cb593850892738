package lab

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// DelayAcctPath is the sysctl that turns the kernel's per-task delay
// accounting on (1) or off (0). Without it /proc/PID/stat field 42 stays 0.
const DelayAcctPath = "/proc/sys/kernel/task_delayacct"

// DelayAcctLockDir holds the files by which every monitor on the machine,
// in any process, shares the switch.
const DelayAcctLockDir = DefaultStateRoot

// The sysctl is machine-wide, so monitors must share one switch rather
// than undo each other: two monitors of one process (a sweep, parallel
// tests) and monitors of two replab processes (two labs, a test suite
// beside a run). Two flocks in lockDir do it. Each monitor holds a shared
// lock on delayacct.holders for as long as it runs. delayacct.mutex is
// held exclusively, briefly, to switch accounting on (recording the value
// found in delayacct.was) and to decide who stops last: a monitor whose
// exclusive lock on the holders succeeds is alone and puts the recorded
// value back. A process that dies drops its locks, so the last monitor
// still restores; when the last one was the one that died (a run killed
// with SIGKILL), `replab lab down` restores (RestoreDelayAcct), as it
// removes what else the dead run left.

// HoldDelayAcct makes sure delay accounting is on at path, coordinating
// through lockDir (DelayAcctLockDir; another directory in tests). It
// returns whether I/O wait can be measured, a note saying why not (or
// what was changed), and a release function to call when the monitor
// stops.
func HoldDelayAcct(path, lockDir string) (ok bool, note string, release func()) {
	mutex, holder, lerr := lockDelayAcct(lockDir)
	defer closeFile(mutex)
	cur, err := readProc(path)
	if err != nil {
		closeFile(holder)
		return false, fmt.Sprintf("I/O wait not measured: %v", err), func() {}
	}
	if cur != "1" {
		if err := os.WriteFile(path, []byte("1"), 0o644); err != nil {
			closeFile(holder)
			return false, fmt.Sprintf("I/O wait not measured: delay accounting is off and could not be switched on: %v", err), func() {}
		}
		note = "delay accounting switched on for the run (" + path + " was " + cur + ")"
		if holder != nil {
			_ = os.WriteFile(filepath.Join(lockDir, "delayacct.was"), []byte(cur), 0o644)
		} else {
			note += "; it stays on afterwards: no lock shared with other monitors (" + lerr.Error() + ")"
		}
	}
	var once sync.Once
	return true, note, func() {
		once.Do(func() {
			if holder == nil {
				return
			}
			defer holder.Close()
			mutex, err := flockFile(filepath.Join(lockDir, "delayacct.mutex"), syscall.LOCK_EX)
			if err != nil {
				return
			}
			defer mutex.Close()
			if syscall.Flock(int(holder.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
				return // another monitor still runs
			}
			was := filepath.Join(lockDir, "delayacct.was")
			if b, err := os.ReadFile(was); err == nil {
				_ = os.WriteFile(path, b, 0o644)
				_ = os.Remove(was)
			}
		})
	}
}

// lockDelayAcct takes the mutex and a shared hold on the holders' lock;
// on error both are nil and the monitor works uncoordinated.
func lockDelayAcct(dir string) (mutex, holder *os.File, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	if mutex, err = flockFile(filepath.Join(dir, "delayacct.mutex"), syscall.LOCK_EX); err != nil {
		return nil, nil, err
	}
	if holder, err = flockFile(filepath.Join(dir, "delayacct.holders"), syscall.LOCK_SH); err != nil {
		mutex.Close()
		return nil, nil, err
	}
	return mutex, holder, nil
}

// flockFile opens (creating) a lock file and takes the flock how on its
// own open file description, so two monitors of one process are two
// holders as two processes' would be.
func flockFile(name string, how int) (*os.File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		return nil, fmt.Errorf("flock %s: %w", name, err)
	}
	return f, nil
}

func closeFile(f *os.File) {
	if f != nil {
		f.Close()
	}
}

// RestoreDelayAcct puts back the value a holder recorded when it switched
// delay accounting on, once no process holds the switch any more: what a
// run killed while measuring leaves (the sysctl on, delayacct.was). A
// value changed since by someone else (not 1 any more) is left alone.
// It returns what it restored, "" when nothing was to restore or a live
// monitor still holds the switch.
func RestoreDelayAcct(path, lockDir string) (string, error) {
	was := filepath.Join(lockDir, "delayacct.was")
	b, err := os.ReadFile(was)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	} else if err != nil {
		return "", err
	}
	mutex, err := flockFile(filepath.Join(lockDir, "delayacct.mutex"), syscall.LOCK_EX)
	if err != nil {
		return "", err
	}
	defer mutex.Close()
	holders, err := os.OpenFile(filepath.Join(lockDir, "delayacct.holders"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return "", err
	}
	defer holders.Close()
	if syscall.Flock(int(holders.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		return "", nil // a live monitor holds it: it restores when it stops
	}
	if b, err = os.ReadFile(was); err != nil { // again, under the mutex
		if errors.Is(err, os.ErrNotExist) {
			return "", nil
		}
		return "", err
	}
	val := strings.TrimSpace(string(b))
	done := ""
	if cur, err := readProc(path); err == nil && cur == "1" && val != "1" {
		if err := os.WriteFile(path, []byte(val), 0o644); err != nil {
			return "", fmt.Errorf("restore %s: %w", path, err)
		}
		done = fmt.Sprintf("sysctl %s restored to %q (a dead run had switched delay accounting on)", procToSysctl(path), val)
	}
	return done, os.Remove(was)
}
