package lab

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupRoot is the cgroup v1 hierarchy (this kernel has no usable v2
// controllers); each controller is mounted at cgroupRoot/<controller>.
const cgroupRoot = "/sys/fs/cgroup"

// siteControllers get a cgroup per site: pids always (so every process of
// a site can be found and killed), cpu and memory for limits.
var siteControllers = []string{"pids", "cpu", "memory"}

// cfsPeriodUs is the CFS bandwidth period used for CPU quotas.
const cfsPeriodUs = 100000

// createSiteCgroups creates the site's cgroups and applies its limits. It
// returns the directories created (for cleanup) even on error.
func createSiteCgroups(name string, cpuCores float64, memBytes int64) ([]string, error) {
	var made []string
	for _, c := range siteControllers {
		base := filepath.Join(cgroupRoot, c)
		if _, err := os.Stat(base); err != nil {
			if c == "pids" {
				continue // optional: processes are also found through the namespace
			}
			if (c == "cpu" && cpuCores == 0) || (c == "memory" && memBytes == 0) {
				continue
			}
			return made, fmt.Errorf("cgroup controller %s is not mounted at %s: needed for the site's %s limit", c, base, c)
		}
		dir := filepath.Join(base, name)
		if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
			return made, fmt.Errorf("create cgroup %s: %w", dir, err)
		}
		made = append(made, dir)
		switch {
		case c == "cpu" && cpuCores > 0:
			quota := int64(cpuCores * cfsPeriodUs)
			if err := os.WriteFile(filepath.Join(dir, "cpu.cfs_period_us"), []byte(strconv.Itoa(cfsPeriodUs)), 0); err != nil {
				return made, fmt.Errorf("set cpu period of %s: %w", name, err)
			}
			if err := os.WriteFile(filepath.Join(dir, "cpu.cfs_quota_us"), []byte(strconv.FormatInt(quota, 10)), 0); err != nil {
				return made, fmt.Errorf("set cpu quota of %s to %.2f cores: %w", name, cpuCores, err)
			}
		case c == "memory" && memBytes > 0:
			if err := os.WriteFile(filepath.Join(dir, "memory.limit_in_bytes"), []byte(strconv.FormatInt(memBytes, 10)), 0); err != nil {
				return made, fmt.Errorf("set memory limit of %s: %w", name, err)
			}
		}
	}
	return made, nil
}

// joinCgroups moves process pid into every cgroup in dirs.
func joinCgroups(pid int, dirs []string) error {
	for _, d := range dirs {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			return fmt.Errorf("join cgroup %s: %w", d, err)
		}
	}
	return nil
}

func cgroupProcs(dir string) []int {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if p, err := strconv.Atoi(f); err == nil {
			pids = append(pids, p)
		}
	}
	return pids
}

func killCgroupProcs(dir string) {
	for range 3 {
		pids := cgroupProcs(dir)
		if len(pids) == 0 {
			return
		}
		for _, p := range pids {
			if p != os.Getpid() {
				_ = syscall.Kill(p, syscall.SIGKILL)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// removeCgroup kills what is left inside a cgroup and removes it (rmdir:
// cgroupfs refuses to delete a cgroup that still has tasks).
func removeCgroup(dir string) error {
	killCgroupProcs(dir)
	var err error
	for range 50 {
		if err = os.Remove(dir); err == nil || os.IsNotExist(err) {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("remove cgroup %s: %w", dir, err)
}

// listCgroups returns every cgroup directory whose name starts with prefix.
func listCgroups(prefix string) []string {
	var out []string
	for _, c := range siteControllers {
		m, _ := filepath.Glob(filepath.Join(cgroupRoot, c, prefix+"*"))
		out = append(out, m...)
	}
	return out
}
