package monitor

import (
	"fmt"
	"os"
	"strings"
	"sync"
)

// DelayAcctPath is the sysctl that turns the kernel's per-task delay
// accounting on (1) or off (0). Without it /proc/PID/stat field 42 stays 0.
const DelayAcctPath = "/proc/sys/kernel/task_delayacct"

// delayAcct turns delay accounting on for as long as any monitor in this
// process runs, and restores the value it found when the last one stops.
// The sysctl is machine-wide, so two monitors in one process (parallel
// tests, a sweep) must share one switch rather than undo each other.
var delayAcct struct {
	sync.Mutex
	users   int
	restore bool // we switched it on: switch it off when users drops to 0
	path    string
}

// enableDelayAcct makes sure delay accounting is on at path. It returns
// whether I/O wait can be measured, a note saying why not (or what was
// changed), and a release function to call when the monitor stops.
func enableDelayAcct(path string) (ok bool, note string, release func()) {
	delayAcct.Lock()
	defer delayAcct.Unlock()
	cur, err := readSysctl(path)
	if err != nil {
		return false, fmt.Sprintf("I/O wait not measured: %v", err), func() {}
	}
	if cur != "1" {
		if err := os.WriteFile(path, []byte("1"), 0o644); err != nil {
			return false, fmt.Sprintf("I/O wait not measured: delay accounting is off and could not be switched on: %v", err), func() {}
		}
		if delayAcct.users == 0 {
			delayAcct.restore, delayAcct.path = true, path
		}
		note = "delay accounting switched on for the run (" + path + " was " + cur + ")"
	}
	delayAcct.users++
	var once sync.Once
	return true, note, func() {
		once.Do(func() {
			delayAcct.Lock()
			defer delayAcct.Unlock()
			delayAcct.users--
			if delayAcct.users == 0 && delayAcct.restore {
				_ = os.WriteFile(delayAcct.path, []byte("0"), 0o644)
				delayAcct.restore = false
			}
		})
	}
}

// delayAcctOn reports whether delay accounting is still on (another
// program may have switched it off during the run).
func delayAcctOn(path string) bool {
	v, err := readSysctl(path)
	return err == nil && v == "1"
}

func readSysctl(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}
