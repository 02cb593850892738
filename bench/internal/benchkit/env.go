package benchkit

import (
	"context"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// Machine is the part of a run's environment every benchmark records: the
// machine and the code. Programs embed it first in their Environment.
type Machine struct {
	Kernel     string `json:"kernel"` // uname -r
	CPUModel   string `json:"cpu_model"`
	CPUCount   int    `json:"cpu_count"`
	GoVersion  string `json:"go_version"`
	GOMAXPROCS int    `json:"gomaxprocs"` // at the end
	GitCommit  string `json:"git_commit,omitempty"`
	GitDirty   *bool  `json:"git_dirty,omitempty"` // uncommitted changes in the work tree
	Date       string `json:"date"`                // start, RFC 3339 UTC
}

// CaptureMachine describes this machine and the work tree's commit; start
// is the run's start. GOMAXPROCS is left for the end of the run.
func CaptureMachine(ctx context.Context, start time.Time) Machine {
	m := Machine{
		Kernel:    Command(ctx, "uname", "-r"),
		GoVersion: runtime.Version(),
		Date:      start.UTC().Format(time.RFC3339),
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			switch strings.TrimSpace(k) {
			case "processor":
				m.CPUCount++
			case "model name":
				if m.CPUModel == "" {
					m.CPUModel = strings.TrimSpace(v)
				}
			}
		}
	}
	if c := Command(ctx, "git", "rev-parse", "HEAD"); c != "" {
		m.GitCommit = c
		out, err := exec.CommandContext(ctx, "git", "status", "--porcelain", "--untracked-files=no").Output()
		if err == nil {
			m.GitDirty = Ptr(len(strings.TrimSpace(string(out))) > 0)
		}
	}
	return m
}

// Command returns the trimmed output of a short command, "" on failure.
func Command(ctx context.Context, name string, args ...string) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// FirstLine is s up to its first newline.
func FirstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// ReadTrim returns a file's trimmed content, "" on failure.
func ReadTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
