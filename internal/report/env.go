// Package report owns the results directory of a run — the resolved spec,
// the environment, summary.json, per-second series, HdrHistogram logs —
// and renders summaries from it.
package report

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// Environment is recorded with every result, so a figure can be traced to
// the machine and versions that produced it.
type Environment struct {
	ReplabVersion string    `json:"replab_version"`
	EngineVersion string    `json:"engine_version,omitempty"`
	Kernel        string    `json:"kernel"`
	CPUModel      string    `json:"cpu_model"`
	CPUs          int       `json:"cpus"`
	MemoryBytes   int64     `json:"memory_bytes"`
	GoVersion     string    `json:"go_version"`
	Hostname      string    `json:"hostname"`
	Time          time.Time `json:"time"`
}

// CaptureEnvironment reads the machine's facts.
func CaptureEnvironment(replabVersion, engineVersion string) Environment {
	e := Environment{
		ReplabVersion: replabVersion,
		EngineVersion: engineVersion,
		CPUs:          runtime.NumCPU(),
		GoVersion:     runtime.Version(),
		Time:          time.Now().UTC(),
	}
	if out, err := exec.Command("uname", "-r").Output(); err == nil {
		e.Kernel = strings.TrimSpace(string(out))
	}
	e.Hostname, _ = os.Hostname()
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				e.CPUModel = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var kb int64
			if n, _ := fmt.Sscanf(sc.Text(), "MemTotal: %d kB", &kb); n == 1 {
				e.MemoryBytes = kb * 1024
				break
			}
		}
		f.Close()
	}
	return e
}
