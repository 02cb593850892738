package lab

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// A site's processes live in cgroups so that all of them can be found and
// killed, and so that the site's cpu and memory limits apply to them. Two
// hierarchies exist: cgroup v1 (one mount per controller, e.g.
// /sys/fs/cgroup/cpu) and cgroup v2 (one unified tree, stock on Debian 12).
// A lab picks one driver at start (chooseCgroups) and never mixes them.

// siteLimits are the limits a site asks for; zero means none.
type siteLimits struct {
	cpuCores float64
	memBytes int64
	// io names the storage limit that needs the site's processes in an
	// I/O controller (v1 blkio, v2 io), e.g. "storage san: iops = 100";
	// "" when none does. The limits themselves are set per device once
	// the device exists (setIOLimits).
	io string
}

// A cgroupDriver makes sites' cgroups in one hierarchy.
type cgroupDriver interface {
	// String names the hierarchy for messages.
	String() string
	// check says why lim cannot be applied, before anything is created.
	check(lim siteLimits) error
	// create makes the cgroups of the site called name, applies lim and
	// returns the directories made, also on error (for cleanup).
	create(name string, lim siteLimits) ([]string, error)
}

// cgroupMount is one mounted cgroup hierarchy.
type cgroupMount struct {
	dir   string   // mount point
	root  string   // the hierarchy's path shown at dir ("/" unless a container hides the rest)
	ctrls []string // v1: its controllers (and "name=…" of a named hierarchy)
}

// cgroupMounts is what /proc/self/mountinfo says about cgroup file
// systems, and /proc/cgroups about the kernel's controllers.
type cgroupMounts struct {
	v1     []cgroupMount
	v2     *cgroupMount          // the unified hierarchy, nil if it is not mounted
	kernel map[string]kernelCtrl // by controller; nil if unknown
}

// kernelCtrl is a controller's line in /proc/cgroups.
type kernelCtrl struct {
	hierarchy int  // the v1 hierarchy it is bound to; 0 if none (free for v2)
	enabled   bool // false when disabled at boot (cgroup_disable=)
}

// parseProcCgroups reads /proc/cgroups:
// "#subsys_name hierarchy num_cgroups enabled" and one line per controller.
func parseProcCgroups(text string) map[string]kernelCtrl {
	out := map[string]kernelCtrl{}
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || strings.HasPrefix(f[0], "#") {
			continue
		}
		h, err1 := strconv.Atoi(f[1])
		e, err2 := strconv.Atoi(f[3])
		if err1 == nil && err2 == nil {
			out[f[0]] = kernelCtrl{hierarchy: h, enabled: e == 1}
		}
	}
	return out
}

// v1Of returns the v1 hierarchy holding controller c, or nil.
func (m cgroupMounts) v1Of(c string) *cgroupMount {
	for i := range m.v1 {
		if slices.Contains(m.v1[i].ctrls, c) {
			return &m.v1[i]
		}
	}
	return nil
}

// v1At returns the v1 hierarchy mounted at dir, or nil.
func (m cgroupMounts) v1At(dir string) *cgroupMount {
	for i := range m.v1 {
		if m.v1[i].dir == dir {
			return &m.v1[i]
		}
	}
	return nil
}

// parseMountinfo reads the cgroup mounts from /proc/PID/mountinfo text:
// "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL…] - FSTYPE SOURCE SUPEROPTIONS".
// A hierarchy mounted twice (bind mounts) counts once, at its first mount
// point; the unified one prefers a mount under /sys/fs/cgroup.
func parseMountinfo(r io.Reader) (cgroupMounts, error) {
	var m cgroupMounts
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		sep := slices.Index(f, "-")
		if sep < 6 || len(f) < sep+4 {
			if len(f) == 0 {
				continue
			}
			return m, fmt.Errorf("mountinfo line %d: want \"ID PARENT DEV ROOT MOUNTPOINT OPTIONS … - TYPE SOURCE OPTIONS\", have %q", n, sc.Text())
		}
		mt := cgroupMount{root: unescapeMount(f[3]), dir: unescapeMount(f[4])}
		switch f[sep+1] {
		case "cgroup":
			for _, o := range strings.Split(f[sep+3], ",") {
				if o == "rw" || o == "ro" || strings.HasPrefix(o, "release_agent=") || o == "clone_children" || o == "noprefix" || o == "xattr" || o == "cpuset_v2_mode" || o == "favordynmods" {
					continue
				}
				mt.ctrls = append(mt.ctrls, o)
			}
			if len(mt.ctrls) > 0 && m.v1Of(mt.ctrls[0]) == nil {
				m.v1 = append(m.v1, mt)
			}
		case "cgroup2":
			if m.v2 == nil || (!strings.HasPrefix(m.v2.dir, "/sys/fs/cgroup") && strings.HasPrefix(mt.dir, "/sys/fs/cgroup")) {
				m.v2 = &mt
			}
		}
	}
	if err := sc.Err(); err != nil {
		return m, fmt.Errorf("read mountinfo: %w", err)
	}
	return m, nil
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// systemCgroups reads this machine's cgroup mounts once: they do not
// change while replab runs.
var systemCgroups = sync.OnceValues(func() (cgroupMounts, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return cgroupMounts{}, fmt.Errorf("find cgroup mounts: %w", err)
	}
	defer f.Close()
	m, err := parseMountinfo(f)
	if b, err := os.ReadFile("/proc/cgroups"); err == nil {
		m.kernel = parseProcCgroups(string(b)) // only for messages: newer kernels may drop it
	}
	return m, err
})

// v2Controllers lists the controllers a v2 cgroup offers its children's
// subtree_control (its cgroup.controllers file).
func v2Controllers(dir string) []string {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return nil
	}
	return strings.Fields(string(b))
}

// chooseCgroups picks the hierarchy for a lab's sites: v2 when the unified
// hierarchy offers both cpu and memory (a v2-only machine, or a hybrid one
// whose controllers were moved to v2); otherwise v1 when any of pids, cpu
// or memory is mounted there (a legacy machine, or a hybrid one whose
// unified hierarchy holds no controllers, like this project's machine);
// otherwise v2 if mounted at all, so that a limit fails naming what v2
// lacks.
func chooseCgroups(m cgroupMounts) cgroupDriver {
	if m.v2 != nil {
		have := v2Controllers(m.v2.dir)
		if slices.Contains(have, "cpu") && slices.Contains(have, "memory") {
			return &cgroupV2{mounts: m, mount: m.v2.dir}
		}
	}
	for _, c := range siteControllersV1 {
		if m.v1Of(c) != nil {
			return &cgroupV1{mounts: m}
		}
	}
	if m.v2 != nil {
		return &cgroupV2{mounts: m, mount: m.v2.dir}
	}
	return &cgroupV1{mounts: m}
}

// systemCgroupDriver is chooseCgroups for this machine.
func systemCgroupDriver() (cgroupDriver, error) {
	m, err := systemCgroups()
	if err != nil {
		return nil, err
	}
	return chooseCgroups(m), nil
}

// formatCores prints a cpu limit as the spec writes it.
func formatCores(c float64) string { return strconv.FormatFloat(c, 'g', -1, 64) }

// cfsQuota converts a cpu limit in cores to a CFS bandwidth quota and
// period in microseconds. The kernel takes quotas of at least 1 ms and
// periods of at most 1 s: small limits get a longer period.
func cfsQuota(cores float64) (quotaUs, periodUs int64, err error) {
	const minQuota, period, maxPeriod = 1000, 100000, 1000000
	periodUs = period
	quotaUs = int64(cores*period + 0.5)
	if quotaUs < minQuota {
		periodUs = maxPeriod
		quotaUs = int64(cores*maxPeriod + 0.5)
	}
	if quotaUs < minQuota {
		return 0, 0, fmt.Errorf("cpu = %s is below the smallest CFS limit (0.001 cores: 1 ms per 1 s period): raise it", formatCores(cores))
	}
	return quotaUs, periodUs, nil
}

// joinCgroups moves process pid into every cgroup in dirs (both
// hierarchies accept a PID in cgroup.procs and move all its threads).
func joinCgroups(pid int, dirs []string) error {
	for _, d := range dirs {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			return fmt.Errorf("join cgroup %s: %w", d, err)
		}
	}
	return nil
}

// isV2 reports whether dir is a cgroup v2 directory: only v2 has
// cgroup.controllers. Records of crashed labs carry bare paths, so the
// hierarchy is found from the directory itself.
func isV2(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "cgroup.controllers"))
	return err == nil
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
	// v2 (Linux 5.14+) kills the whole cgroup at once, forks in flight too.
	_ = os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
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
// cgroupfs refuses to delete a cgroup that still has tasks). A v2 site's
// parent goes too once no lab uses it.
func removeCgroup(dir string) error {
	v2 := isV2(dir)
	killCgroupProcs(dir)
	var err error
	for range 50 {
		if err = os.Remove(dir); err == nil || errors.Is(err, os.ErrNotExist) {
			if v2 {
				removeV2Parent(filepath.Dir(dir))
			}
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("remove cgroup %s: %w", dir, err)
}

// listCgroups returns every site cgroup directory, in either hierarchy,
// whose name starts with prefix.
func listCgroups(prefix string) []string {
	m, err := systemCgroups()
	if err != nil {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	// blkio: sites with a storage's I/O limits (siteLimits.io).
	for _, c := range append(slices.Clip(siteControllersV1), "blkio") {
		if h := m.v1Of(c); h != nil && !seen[h.dir] {
			seen[h.dir] = true
			g, _ := filepath.Glob(filepath.Join(h.dir, prefix+"*"))
			out = append(out, g...)
		}
	}
	if m.v2 != nil {
		g, _ := filepath.Glob(filepath.Join(m.v2.dir, v2Parent, prefix+"*"))
		out = append(out, g...)
	}
	return out
}

// removeEmptyV2Parent removes replab's v2 parent cgroup if no lab uses it
// (a crash between creating it and a site's cgroup leaves it empty).
func removeEmptyV2Parent() {
	if m, err := systemCgroups(); err == nil && m.v2 != nil {
		removeV2Parent(filepath.Join(m.v2.dir, v2Parent))
	}
}

// setIOLimits limits, for the processes of a site (its cgroup dirs), the
// I/O on one block device: operations and bytes per second, each of reads
// and of writes (0 = no limit). v1 writes blkio.throttle.*_device, v2
// io.max.
func setIOLimits(dirs []string, major, minor uint32, iops, bps int64) error {
	dev := fmt.Sprintf("%d:%d", major, minor)
	done := false
	for _, d := range dirs {
		if isV2(d) {
			var kv []string
			if iops > 0 {
				kv = append(kv, fmt.Sprintf("riops=%d wiops=%d", iops, iops))
			}
			if bps > 0 {
				kv = append(kv, fmt.Sprintf("rbps=%d wbps=%d", bps, bps))
			}
			if err := writeCgroupFile(d, "io.max", dev+" "+strings.Join(kv, " ")); err != nil {
				return err
			}
			done = true
			continue
		}
		if _, err := os.Stat(filepath.Join(d, "blkio.throttle.read_iops_device")); err != nil {
			continue // another v1 hierarchy
		}
		for _, f := range []struct {
			file string
			v    int64
		}{
			{"blkio.throttle.read_iops_device", iops}, {"blkio.throttle.write_iops_device", iops},
			{"blkio.throttle.read_bps_device", bps}, {"blkio.throttle.write_bps_device", bps},
		} {
			if f.v > 0 {
				if err := writeCgroupFile(d, f.file, fmt.Sprintf("%s %d", dev, f.v)); err != nil {
					return err
				}
			}
		}
		done = true
	}
	if !done {
		return fmt.Errorf("no I/O controller among the site's cgroups %s", strings.Join(dirs, ", "))
	}
	return nil
}
