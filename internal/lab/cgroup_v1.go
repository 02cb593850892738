package lab

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"replab/internal/units"
)

// siteControllersV1 get a cgroup per site on v1: pids always (so every
// process of a site can be found and killed), cpu and memory for limits.
// A site without limits is still in its own cpu cgroup, so the scheduler
// shares the machine between sites, not between processes.
var siteControllersV1 = []string{"pids", "cpu", "memory"}

// cgroupV1 makes one directory per site in each controller's hierarchy.
type cgroupV1 struct {
	mounts cgroupMounts
}

func (d *cgroupV1) String() string {
	var have []string
	for _, c := range siteControllersV1 {
		if h := d.mounts.v1Of(c); h != nil {
			have = append(have, c+" at "+h.dir)
		}
	}
	if len(have) == 0 {
		return "cgroup v1 (no controller mounted)"
	}
	return "cgroup v1 (" + strings.Join(have, ", ") + ")"
}

func (d *cgroupV1) check(lim siteLimits) error {
	var errs []error
	if lim.cpuCores > 0 {
		if _, _, err := cfsQuota(lim.cpuCores); err != nil {
			errs = append(errs, err)
		}
	}
	for _, l := range []struct {
		ctrl, setting string
		set           bool
	}{
		{"cpu", "cpu = " + formatCores(lim.cpuCores), lim.cpuCores > 0},
		{"memory", "memory = " + units.Bytes(float64(lim.memBytes)), lim.memBytes > 0},
		{"blkio", lim.io, lim.io != ""},
	} {
		if l.set && d.mounts.v1Of(l.ctrl) == nil {
			errs = append(errs, d.missing(l.ctrl, l.setting))
		}
	}
	return errors.Join(errs...)
}

// missing explains a limit whose v1 controller is not mounted.
func (d *cgroupV1) missing(ctrl, setting string) error {
	if d.mounts.v2 == nil && len(d.mounts.v1) == 0 {
		return fmt.Errorf("%s needs the cgroup %s controller, but no cgroup file system is mounted (see /proc/self/mountinfo): "+
			"mount one (mount -t cgroup2 none /sys/fs/cgroup), or remove %s from the site", setting, ctrl, ctrl)
	}
	if d.mounts.v2 != nil && slices.Contains(v2Controllers(d.mounts.v2.dir), ctrl) {
		return fmt.Errorf("%s needs the %s controller, which is in the cgroup v2 hierarchy at %s while %s, and a lab uses one hierarchy: "+
			"move every controller to v2 (boot with systemd.unified_cgroup_hierarchy=1), or remove %s from the site", setting, ctrl, d.mounts.v2.dir, d.why(), ctrl)
	}
	return fmt.Errorf("%s needs the cgroup v1 %s controller, which is not mounted (replab uses cgroup v1 here because %s): "+
		"mount it (mkdir -p /sys/fs/cgroup/%s && mount -t cgroup -o %s cgroup /sys/fs/cgroup/%s), or remove %s from the site",
		setting, ctrl, d.why(), ctrl, ctrl, ctrl, ctrl)
}

// why says what made chooseCgroups pick v1.
func (d *cgroupV1) why() string {
	for _, c := range siteControllersV1 {
		if h := d.mounts.v1Of(c); h != nil {
			return c + " is mounted as v1 at " + h.dir
		}
	}
	return "no cgroup v2 hierarchy is mounted"
}

func (d *cgroupV1) create(name string, lim siteLimits) ([]string, error) {
	if err := d.check(lim); err != nil {
		return nil, err
	}
	var made []string
	seen := map[string]bool{}
	ctrls := siteControllersV1
	if lim.io != "" {
		ctrls = append(slices.Clip(ctrls), "blkio")
	}
	for _, c := range ctrls {
		h := d.mounts.v1Of(c)
		if h == nil || seen[h.dir] {
			continue // pids is optional: processes are also found through the namespace
		}
		seen[h.dir] = true
		dir := filepath.Join(h.dir, name)
		if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
			return made, fmt.Errorf("create cgroup %s: %w", dir, err)
		}
		made = append(made, dir)
		if err := applyV1Limits(dir, h.ctrls, lim); err != nil {
			return made, err
		}
	}
	return made, nil
}

// applyV1Limits writes lim into the v1 cgroup dir of a hierarchy holding
// ctrls.
func applyV1Limits(dir string, ctrls []string, lim siteLimits) error {
	has := func(c string) bool { return strings.Contains(","+strings.Join(ctrls, ",")+",", ","+c+",") }
	if has("cpu") && lim.cpuCores > 0 {
		quota, period, err := cfsQuota(lim.cpuCores)
		if err != nil {
			return err
		}
		if err := writeCgroupFile(dir, "cpu.cfs_period_us", strconv.FormatInt(period, 10)); err != nil {
			return err
		}
		if err := writeCgroupFile(dir, "cpu.cfs_quota_us", strconv.FormatInt(quota, 10)); err != nil {
			return err
		}
	}
	if has("memory") && lim.memBytes > 0 {
		if err := writeCgroupFile(dir, "memory.limit_in_bytes", strconv.FormatInt(lim.memBytes, 10)); err != nil {
			return err
		}
	}
	return nil
}

// writeCgroupFile writes one cgroup control file.
func writeCgroupFile(dir, file, value string) error {
	if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0); err != nil {
		return fmt.Errorf("write %q to %s: %w", value, filepath.Join(dir, file), err)
	}
	return nil
}

// threadCgroupsV1 returns, for each v1 cgroup dir in dirs, the directory
// of the same hierarchy that the calling thread is in now.
func threadCgroupsV1(m cgroupMounts, dirs []string) ([]string, error) {
	b, err := os.ReadFile("/proc/thread-self/cgroup")
	if err != nil {
		return nil, err
	}
	return threadCgroupsFrom(m, string(b), dirs)
}

// threadCgroupsFrom is threadCgroupsV1 over /proc/thread-self/cgroup text
// ("ID:CONTROLLERS:PATH" lines).
func threadCgroupsFrom(m cgroupMounts, procCgroup string, dirs []string) ([]string, error) {
	out := make([]string, 0, len(dirs))
	for _, d := range dirs {
		h := m.v1At(filepath.Dir(d))
		if h == nil {
			return nil, fmt.Errorf("cgroup %s is in no mounted cgroup v1 hierarchy", d)
		}
		found := false
		for _, line := range strings.Split(strings.TrimSpace(procCgroup), "\n") {
			f := strings.SplitN(line, ":", 3)
			if len(f) != 3 || f[1] == "" || !strings.Contains(","+f[1]+",", ","+h.ctrls[0]+",") {
				continue
			}
			// A container may show only part of the hierarchy: its root.
			rel, ok := strings.CutPrefix(f[2], strings.TrimSuffix(h.root, "/"))
			if !ok {
				return nil, fmt.Errorf("thread's %s cgroup %s is outside the part mounted at %s (%s)", h.ctrls[0], f[2], h.dir, h.root)
			}
			out = append(out, filepath.Join(h.dir, rel))
			found = true
			break
		}
		if !found {
			return nil, fmt.Errorf("thread is in no %s cgroup", strings.Join(h.ctrls, ","))
		}
	}
	return out, nil
}

// moveThreadV1 moves one thread (v1 cgroups hold threads, not processes).
func moveThreadV1(tid int, dirs []string) error {
	for _, d := range dirs {
		if err := os.WriteFile(filepath.Join(d, "tasks"), []byte(strconv.Itoa(tid)), 0); err != nil {
			return fmt.Errorf("move thread into cgroup %s: %w", d, err)
		}
	}
	return nil
}
