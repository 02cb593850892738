package monitor

import (
	"os"
	"strings"

	"replab/internal/lab"
)

// DelayAcctPath is the sysctl that turns the kernel's per-task delay
// accounting on (1) or off (0). Without it /proc/PID/stat field 42 stays 0.
const DelayAcctPath = lab.DelayAcctPath

// DelayAcctLockDir holds the files by which every monitor on the machine,
// in any process, shares the switch (lab.HoldDelayAcct).
const DelayAcctLockDir = lab.DelayAcctLockDir

// enableDelayAcct makes sure delay accounting is on at path while the
// monitor runs: lab.HoldDelayAcct, which lab down also knows how to undo
// after a run that died.
func enableDelayAcct(path, lockDir string) (ok bool, note string, release func()) {
	return lab.HoldDelayAcct(path, lockDir)
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
