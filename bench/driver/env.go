package main

import (
	"context"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// Environment describes the machine and the code a run measured.
type Environment struct {
	Kernel         string `json:"kernel"` // uname -r
	CPUModel       string `json:"cpu_model"`
	CPUCount       int    `json:"cpu_count"`
	GoVersion      string `json:"go_version"`
	GOMAXPROCS     int    `json:"gomaxprocs"` // at the end
	GitCommit      string `json:"git_commit,omitempty"`
	GitDirty       *bool  `json:"git_dirty,omitempty"` // uncommitted changes in the work tree
	Date           string `json:"date"`                // start, RFC 3339 UTC
	PostgresServer string `json:"postgres_version"`
	PgbenchVersion string `json:"pgbench_version"`
	LoadAvgStart   string `json:"loadavg_start"` // /proc/loadavg: other work on the machine skews figures
	LoadAvgEnd     string `json:"loadavg_end"`
}

func environment(ctx context.Context, start time.Time, pgbench string) Environment {
	e := Environment{
		Kernel:         command(ctx, "uname", "-r"),
		GoVersion:      runtime.Version(),
		Date:           start.UTC().Format(time.RFC3339),
		PgbenchVersion: firstLine(command(ctx, pgbench, "--version")),
		LoadAvgStart:   readTrim("/proc/loadavg"),
	}
	e.PostgresServer = firstLine(command(ctx, strings.TrimSuffix(pgbench, "pgbench")+"postgres", "--version"))
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			switch strings.TrimSpace(k) {
			case "processor":
				e.CPUCount++
			case "model name":
				if e.CPUModel == "" {
					e.CPUModel = strings.TrimSpace(v)
				}
			}
		}
	}
	if c := command(ctx, "git", "rev-parse", "HEAD"); c != "" {
		e.GitCommit = c
		out, err := exec.CommandContext(ctx, "git", "status", "--porcelain", "--untracked-files=no").Output()
		if err == nil {
			e.GitDirty = ptr(len(strings.TrimSpace(string(out))) > 0)
		}
	}
	return e
}

// command returns the trimmed output of a short command, "" on failure.
func command(ctx context.Context, name string, args ...string) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
