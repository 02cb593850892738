package lab

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"replab/internal/units"
)

// v2Parent is replab's cgroup at the top of the unified hierarchy; each
// site is a child of it. cgroup v2 lets a cgroup enable controllers for
// its children only while it holds no processes itself ("no internal
// processes"), so no process ever joins the parent.
const v2Parent = "replab"

// siteControllersV2 are enabled for the sites when the hierarchy offers
// them, limit or not, as v1 gives every site its own pids, cpu and memory
// cgroup: the scheduler then shares the machine between sites alike.
var siteControllersV2 = []string{"cpu", "memory", "pids"}

// cgroupV2 makes one directory per site, holding every controller, under
// mount/replab.
type cgroupV2 struct {
	mounts cgroupMounts
	mount  string // mount point of the unified hierarchy
}

func (d *cgroupV2) String() string { return "cgroup v2 at " + d.mount }

// limitControllers are the controllers lim needs, with the spec setting
// that needs each.
func limitControllers(lim siteLimits) (ctrls, settings []string) {
	if lim.cpuCores > 0 {
		ctrls, settings = append(ctrls, "cpu"), append(settings, "cpu = "+formatCores(lim.cpuCores))
	}
	if lim.memBytes > 0 {
		ctrls, settings = append(ctrls, "memory"), append(settings, "memory = "+units.Bytes(float64(lim.memBytes)))
	}
	if lim.io != "" {
		ctrls, settings = append(ctrls, "io"), append(settings, lim.io)
	}
	return ctrls, settings
}

func (d *cgroupV2) check(lim siteLimits) error {
	var errs []error
	if lim.cpuCores > 0 {
		if _, _, err := cfsQuota(lim.cpuCores); err != nil {
			errs = append(errs, err)
		}
	}
	have := v2Controllers(d.mount)
	ctrls, settings := limitControllers(lim)
	for i, c := range ctrls {
		if slices.Contains(have, c) {
			continue
		}
		offers := strings.Join(have, " ")
		if offers == "" {
			offers = "none"
		}
		what := fmt.Sprintf("%s needs the cgroup v2 %s controller, which %s does not offer (it offers: %s)",
			settings[i], c, filepath.Join(d.mount, "cgroup.controllers"), offers)
		errs = append(errs, fmt.Errorf("%s: %s, or remove %s from the site", what, d.whyMissing(c), c))
	}
	return errors.Join(errs...)
}

// whyMissing says why the hierarchy does not offer controller c, and what
// to do about it.
func (d *cgroupV2) whyMissing(c string) string {
	const oneHierarchy = "a controller works in one hierarchy at a time: boot with every controller in v2 " +
		"(systemd.unified_cgroup_hierarchy=1, Debian 12's default)"
	if h := d.mounts.v1Of(c); h != nil {
		return fmt.Sprintf("it is mounted as cgroup v1 at %s, and %s", h.dir, oneHierarchy)
	}
	if d.mounts.kernel == nil {
		return fmt.Sprintf("the kernel may lack it (see /proc/cgroups) or have it disabled (cgroup_disable=%s in /proc/cmdline): enable it", c)
	}
	k, ok := d.mounts.kernel[c]
	switch {
	case !ok:
		return fmt.Sprintf("this kernel has no %s controller (it is not in /proc/cgroups): use a kernel that has it", c)
	case !k.enabled:
		return fmt.Sprintf("it is disabled at boot: remove cgroup_disable=%s from the kernel command line", c)
	case k.hierarchy != 0:
		return fmt.Sprintf("it is bound to cgroup v1 hierarchy %d (see /proc/cgroups), though not mounted here, and %s", k.hierarchy, oneHierarchy)
	}
	return fmt.Sprintf("the cgroup above %s does not pass it on (in a container: the host did not delegate it): "+
		"enable it there (write +%s to that cgroup's cgroup.subtree_control on the host), or run replab on the host", d.mount, c)
}

func (d *cgroupV2) create(name string, lim siteLimits) ([]string, error) {
	if err := d.check(lim); err != nil {
		return nil, err
	}
	need, settings := limitControllers(lim)
	parent := filepath.Join(d.mount, v2Parent)
	dir := filepath.Join(parent, name)
	var err error
	// Another lab removes the parent when its last site goes: if it went
	// between our steps, make it again.
	for range 5 {
		if err = d.prepareParent(parent, need, settings); err == nil {
			if err = os.Mkdir(dir, 0o755); errors.Is(err, os.ErrExist) {
				err = nil
			}
		}
		if !errors.Is(err, os.ErrNotExist) {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("create cgroup %s: %w", dir, explainV2(err))
	}
	return []string{dir}, applyV2Limits(dir, lim)
}

// prepareParent makes replab's parent cgroup and enables the site
// controllers in it, and in the root first when a limit needs one the
// root does not pass on. A controller enabled in the root stays enabled:
// other cgroups may come to rely on it (systemd enables them all anyway).
func (d *cgroupV2) prepareParent(parent string, need, settings []string) error {
	rootCtl := filepath.Join(d.mount, "cgroup.subtree_control")
	b, err := os.ReadFile(rootCtl)
	if err != nil {
		return fmt.Errorf("read %s: %w", rootCtl, err)
	}
	passed := strings.Fields(string(b))
	var add, why []string
	for i, c := range need {
		if !slices.Contains(passed, c) {
			add = append(add, "+"+c)
			why = append(why, settings[i])
			passed = append(passed, c)
		}
	}
	if len(add) > 0 {
		if err := os.WriteFile(rootCtl, []byte(strings.Join(add, " ")), 0); err != nil {
			return fmt.Errorf("%s: enable %s in %s: %w", strings.Join(why, ", "), strings.Join(add, " "), rootCtl, explainV2(err))
		}
	}
	if err := os.Mkdir(parent, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	ctl := filepath.Join(parent, "cgroup.subtree_control")
	b, _ = os.ReadFile(ctl)
	on := strings.Fields(string(b))
	var want, needed []string
	ctrls := slices.Clip(siteControllersV2)
	for _, c := range need { // io, for a storage's I/O limits
		if !slices.Contains(ctrls, c) {
			ctrls = append(ctrls, c)
		}
	}
	for _, c := range ctrls {
		if slices.Contains(passed, c) && !slices.Contains(on, c) {
			want = append(want, "+"+c)
			if slices.Contains(need, c) {
				needed = append(needed, "+"+c)
			}
		}
	}
	if len(want) == 0 {
		return nil
	}
	// One write is all or nothing: if an optional controller is refused,
	// still enable the ones a limit needs.
	if err := os.WriteFile(ctl, []byte(strings.Join(want, " ")), 0); err == nil || len(needed) == 0 {
		return nil
	}
	if err := os.WriteFile(ctl, []byte(strings.Join(needed, " ")), 0); err != nil {
		return fmt.Errorf("enable %s in %s: %w", strings.Join(needed, " "), ctl, err)
	}
	return nil
}

// applyV2Limits writes lim into a site's v2 cgroup.
func applyV2Limits(dir string, lim siteLimits) error {
	if lim.cpuCores > 0 {
		quota, period, err := cfsQuota(lim.cpuCores)
		if err != nil {
			return err
		}
		if err := writeCgroupFile(dir, "cpu.max", fmt.Sprintf("%d %d", quota, period)); err != nil {
			return err
		}
	}
	if lim.memBytes > 0 {
		if err := writeCgroupFile(dir, "memory.max", strconv.FormatInt(lim.memBytes, 10)); err != nil {
			return err
		}
	}
	return nil
}

// explainV2 adds what to do to the errors cgroup v2 gives for a
// hierarchy replab cannot use.
func explainV2(err error) error {
	switch {
	case errors.Is(err, syscall.EBUSY):
		return fmt.Errorf("%w (cgroup v2 enables controllers for children only in a cgroup without processes of its own: "+
			"in a container, move its processes into a child cgroup first, or run replab on the host)", err)
	case errors.Is(err, syscall.EROFS), errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return fmt.Errorf("%w (the cgroup file system is not writable: run replab as root on the host, or give the container "+
			"its own writable cgroup namespace, e.g. docker run --privileged --cgroupns=private)", err)
	}
	return err
}

// removeV2Parent removes replab's parent cgroup once no site is left in it
// (rmdir refuses while any lab still has one).
func removeV2Parent(parent string) {
	if filepath.Base(parent) == v2Parent && isV2(parent) {
		_ = os.Remove(parent)
	}
}
