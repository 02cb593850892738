package testkit

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// The lock keeps replab's integration tests apart, but not everything else
// a suite runs: the packages without servers go on beside a test that has
// the machine alone, and so do the compiles of packages not yet built. A
// clean-clone suite failed so: a CPU-limit search found "the machine's cpu
// … other work 0.75" instead of its site's limit. So an exclusive holder
// also waits, a bounded time, for the rest of the machine to go quiet.

const (
	// quietCores is the other work (cores) under which the machine is quiet.
	quietCores = 0.25
	// quietWithin bounds the wait: past it the test goes on, and says so.
	quietWithin = 60 * time.Second
	// quietWindow is how long one reading of the other work lasts.
	quietWindow = 500 * time.Millisecond
	// clockTicks is USER_HZ, the unit of /proc's CPU times (100 on Linux).
	clockTicks = 100
)

// waitQuiet waits until the CPU used by processes other than this one
// stays under quietCores for one window, for up to quietWithin; logf says
// how long it waited, or that it stopped waiting.
func waitQuiet(logf func(format string, args ...any)) {
	start := time.Now()
	for {
		other, err := otherCores(quietWindow)
		if err != nil {
			logf("testkit: cannot tell whether the machine is quiet: %v", err)
			return
		}
		switch waited := time.Since(start); {
		case other < quietCores:
			if waited > 2*quietWindow {
				logf("testkit: waited %.1f s for the machine's other work to end", waited.Seconds())
			}
			return
		case waited > quietWithin:
			logf("testkit: the machine is not quiet after %s (%.2f cores of other work): measuring anyway", quietWithin, other)
			return
		}
	}
}

// otherCores is the machine's busy time over d, less this process's, in
// cores.
func otherCores(d time.Duration) (float64, error) {
	b0, s0, err := cpuTicks()
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	time.Sleep(d)
	b1, s1, err := cpuTicks()
	if err != nil {
		return 0, err
	}
	return max(0, float64((b1-b0)-(s1-s0))/clockTicks/time.Since(t0).Seconds()), nil
}

// cpuTicks reads the machine's busy time and this process's, together.
// (internal/monitor reads the same files for its machine figures; testkit
// cannot import it: monitor's tests import testkit through pgtest.)
func cpuTicks() (busy, self int64, err error) {
	if busy, err = machineBusyTicks(); err != nil {
		return 0, 0, err
	}
	self, err = selfTicks()
	return busy, self, err
}

// machineBusyTicks sums /proc/stat's first line but for idle and iowait.
func machineBusyTicks() (int64, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 8 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var busy int64
	for i, v := range f[1:] {
		if i == 3 || i == 4 || i >= 8 { // idle, iowait; guest times are in user already
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: %w", err)
		}
		busy += n
	}
	return busy, nil
}

// selfTicks is this process's user and system time.
func selfTicks() (int64, error) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, err
	}
	// The command may hold spaces and parentheses: fields follow the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/self/stat: no command")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/self/stat: %d fields", len(f))
	}
	var t int64
	for _, v := range f[11:13] { // utime, stime (fields 14 and 15)
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/self/stat: %w", err)
		}
		t += n
	}
	return t, nil
}
