package lab

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Mountinfo lines as the kernel writes them.
const (
	// This project's machine: v1 controllers plus an empty unified hierarchy.
	mountinfoHybrid = `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`
	// Stock Debian 12 (systemd 252): the unified hierarchy only.
	mountinfoDebian12 = `22 28 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
30 22 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
`
	// Debian 10 style legacy: cpu and cpuacct share a hierarchy.
	mountinfoLegacy = `25 24 0:22 / /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime shared:5 - cgroup cgroup rw,xattr,name=systemd
28 24 0:25 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:8 - cgroup cgroup rw,cpu,cpuacct
29 24 0:26 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:9 - cgroup cgroup rw,memory
30 24 0:27 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:10 - cgroup cgroup rw,pids
`
)

func TestParseMountinfo(t *testing.T) {
	type v1 struct{ ctrl, dir, root string }
	for _, tc := range []struct {
		name string
		text string
		v1   []v1
		n    int // v1 hierarchies
		v2   string
	}{
		{"a hybrid machine has v1 controllers and the unified hierarchy at unified/", mountinfoHybrid,
			[]v1{{"cpu", "/sys/fs/cgroup/cpu", "/"}, {"memory", "/sys/fs/cgroup/memory", "/"}, {"pids", "/sys/fs/cgroup/pids", "/"}, {"name=systemd", "/sys/fs/cgroup/systemd", "/"}},
			5, "/sys/fs/cgroup/unified"},
		{"stock Debian 12 has only the unified hierarchy", mountinfoDebian12, nil, 0, "/sys/fs/cgroup"},
		{"co-mounted controllers share one mount point", mountinfoLegacy,
			[]v1{{"cpu", "/sys/fs/cgroup/cpu,cpuacct", "/"}, {"cpuacct", "/sys/fs/cgroup/cpu,cpuacct", "/"}, {"memory", "/sys/fs/cgroup/memory", "/"}},
			4, ""},
		{"a container may show only part of a hierarchy",
			"40 30 0:30 /docker/abc /sys/fs/cgroup/cpu ro,nosuid - cgroup cgroup rw,cpu\n",
			[]v1{{"cpu", "/sys/fs/cgroup/cpu", "/docker/abc"}}, 1, ""},
		{"a bind mount of a hierarchy counts once, at its first mount point",
			"32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n90 31 0:29 / /mnt/cpu rw - cgroup cgroup rw,cpu\n",
			[]v1{{"cpu", "/sys/fs/cgroup/cpu", "/"}}, 1, ""},
		{"the unified hierarchy under /sys/fs/cgroup wins over another mount of it",
			"90 31 0:38 / /tmp/cg2 rw - cgroup2 none rw\n41 31 0:38 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
			nil, 0, "/sys/fs/cgroup"},
		{"escaped spaces in a mount point are undone",
			`90 31 0:38 / /tmp/my\040cgroups rw - cgroup2 none rw` + "\n",
			nil, 0, "/tmp/my cgroups"},
		{"optional fields before the separator are skipped",
			"32 31 0:29 / /sys/fs/cgroup/memory rw shared:9 master:2 - cgroup cgroup rw,memory,clone_children\n",
			[]v1{{"memory", "/sys/fs/cgroup/memory", "/"}}, 1, ""},
		{"no cgroup file system at all", "22 28 0:21 / /sys rw - sysfs sysfs rw\n", nil, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := parseMountinfo(strings.NewReader(tc.text))
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.v1 {
				h := m.v1Of(w.ctrl)
				if h == nil || h.dir != w.dir || h.root != w.root {
					t.Errorf("v1 %s: got %+v, want at %s (root %s)", w.ctrl, h, w.dir, w.root)
				}
			}
			if len(m.v1) != tc.n {
				t.Errorf("%d v1 hierarchies %+v, want %d", len(m.v1), m.v1, tc.n)
			}
			switch {
			case tc.v2 == "" && m.v2 != nil:
				t.Errorf("v2 at %s, want none", m.v2.dir)
			case tc.v2 != "" && (m.v2 == nil || m.v2.dir != tc.v2):
				t.Errorf("v2 %+v, want at %s", m.v2, tc.v2)
			}
		})
	}
	t.Run("a malformed line is an error naming it", func(t *testing.T) {
		_, err := parseMountinfo(strings.NewReader(mountinfoHybrid + "garbage here\n"))
		if err == nil || !strings.Contains(err.Error(), "mountinfo line 8") {
			t.Fatalf("got %v, want an error at line 8", err)
		}
	})
}

// fakeV1 mounts: a directory per hierarchy in a temporary tree.
func fakeV1(t *testing.T, hierarchies ...string) cgroupMounts {
	t.Helper()
	var m cgroupMounts
	base := t.TempDir()
	for _, h := range hierarchies {
		dir := filepath.Join(base, h)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		m.v1 = append(m.v1, cgroupMount{dir: dir, root: "/", ctrls: strings.Split(h, ",")})
	}
	return m
}

// fakeV2 is a unified hierarchy's root offering controllers and passing
// passed on to its children.
func fakeV2(t *testing.T, controllers, passed string) string {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "cgroup.controllers"), controllers)
	writeFile(t, filepath.Join(dir, "cgroup.subtree_control"), passed)
	return dir
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		return "<missing>"
	}
	return string(b)
}

const debian12Controllers = "cpuset cpu io memory hugetlb pids rdma misc"

func TestChooseCgroups(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mounts func(t *testing.T) cgroupMounts
		want   string // prefix of the driver's String
	}{
		{"a v2-only machine uses v2", func(t *testing.T) cgroupMounts {
			return cgroupMounts{v2: &cgroupMount{dir: fakeV2(t, debian12Controllers, debian12Controllers)}}
		}, "cgroup v2 at "},
		{"a hybrid machine whose unified hierarchy holds no cpu or memory uses v1", func(t *testing.T) cgroupMounts {
			m := fakeV1(t, "cpu", "memory", "pids", "name=systemd")
			m.v2 = &cgroupMount{dir: fakeV2(t, "hugetlb", "")}
			return m
		}, "cgroup v1 (pids at "},
		{"a hybrid machine whose controllers moved to v2 uses v2", func(t *testing.T) cgroupMounts {
			m := fakeV1(t, "name=systemd")
			m.v2 = &cgroupMount{dir: fakeV2(t, "cpu memory pids", "")}
			return m
		}, "cgroup v2 at "},
		{"a legacy machine uses v1", func(t *testing.T) cgroupMounts { return fakeV1(t, "cpu,cpuacct", "memory") }, "cgroup v1 (cpu at "},
		{"a v2 hierarchy without controllers is still v2, so limits fail naming it", func(t *testing.T) cgroupMounts {
			return cgroupMounts{v2: &cgroupMount{dir: fakeV2(t, "", "")}}
		}, "cgroup v2 at "},
		{"no cgroup file system", func(t *testing.T) cgroupMounts { return cgroupMounts{} }, "cgroup v1 (no controller mounted)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := chooseCgroups(tc.mounts(t)).String(); !strings.HasPrefix(got, tc.want) {
				t.Errorf("chose %q, want %q…", got, tc.want)
			}
		})
	}
}

func TestCfsQuota(t *testing.T) {
	for _, tc := range []struct {
		cores         float64
		quota, period int64
	}{
		{0.25, 25000, 100000},
		{2, 200000, 100000},
		{1024, 102400000, 100000},
		{0.01, 1000, 100000},   // the kernel's smallest quota, 1 ms
		{0.005, 5000, 1000000}, // below it: a longer period keeps the ratio
		{0.001, 1000, 1000000},
	} {
		q, p, err := cfsQuota(tc.cores)
		if err != nil || q != tc.quota || p != tc.period {
			t.Errorf("cpu = %g: quota %d period %d (%v), want %d %d", tc.cores, q, p, err, tc.quota, tc.period)
		}
	}
	if _, _, err := cfsQuota(0.0005); err == nil || !strings.Contains(err.Error(), "cpu = 0.0005 is below the smallest CFS limit") {
		t.Errorf("cpu = 0.0005: got %v, want a clear error", err)
	}
}

func TestCgroupV2WritesLimitsAndEnablesControllers(t *testing.T) {
	const site = "replab-lab.eu"
	for _, tc := range []struct {
		name        string
		offered     string // the root's cgroup.controllers
		passed      string // the root's cgroup.subtree_control before
		lim         siteLimits
		rootAfter   string // what the root's subtree_control holds after (the fake keeps the last write)
		parentAfter string
		cpuMax      string
		memoryMax   string
	}{
		{"limits on a stock Debian 12 root write cpu.max and memory.max", debian12Controllers, debian12Controllers,
			siteLimits{cpuCores: 0.25, memBytes: 256 << 20}, debian12Controllers, "+cpu +memory +pids", "25000 100000", "268435456"},
		{"a limit whose controller the root does not pass on enables it there", "cpu memory pids", "memory pids",
			siteLimits{cpuCores: 2}, "+cpu", "+cpu +memory +pids", "200000 100000", "<missing>"},
		{"without limits the root is left alone and only what it passes on is enabled", "cpu memory pids", "memory pids",
			siteLimits{}, "memory pids", "+memory +pids", "<missing>", "<missing>"},
		{"a tiny cpu limit gets a longer period", debian12Controllers, debian12Controllers,
			siteLimits{cpuCores: 0.005}, debian12Controllers, "+cpu +memory +pids", "5000 1000000", "<missing>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := fakeV2(t, tc.offered, tc.passed)
			d := &cgroupV2{mount: root}
			dirs, err := d.create(site, tc.lim)
			if err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(root, "replab", site)
			if !slices.Equal(dirs, []string{dir}) {
				t.Fatalf("created %v, want one directory %s holding every controller", dirs, dir)
			}
			for _, f := range []struct{ path, want string }{
				{filepath.Join(root, "cgroup.subtree_control"), tc.rootAfter},
				{filepath.Join(root, "replab", "cgroup.subtree_control"), tc.parentAfter},
				{filepath.Join(dir, "cpu.max"), tc.cpuMax},
				{filepath.Join(dir, "memory.max"), tc.memoryMax},
			} {
				if got := readFile(t, f.path); got != f.want {
					t.Errorf("%s = %q, want %q", strings.TrimPrefix(f.path, root), got, f.want)
				}
			}
		})
	}
}

func TestCgroupV2RefusesALimitItCannotApply(t *testing.T) {
	// /proc/cgroups on this project's machine (cpu bound to v1), and with
	// cpu free for v2 or disabled at boot.
	const (
		procHybrid   = "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpu\t1\t1\t1\nmemory\t4\t44\t1\npids\t8\t1\t1\nhugetlb\t0\t1\t1\n"
		procFree     = "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpu\t0\t90\t1\nmemory\t0\t90\t1\n"
		procDisabled = "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpu\t0\t1\t0\nmemory\t0\t90\t1\n"
	)
	for _, tc := range []struct {
		name    string
		offered string
		v1      []string
		proc    string // /proc/cgroups; "" unknown
		lim     siteLimits
		want    []string
	}{
		{"cpu missing from the hierarchy, kernel state unknown", "memory pids", nil, "", siteLimits{cpuCores: 0.25}, []string{
			"cpu = 0.25 needs the cgroup v2 cpu controller, which ", "/cgroup.controllers does not offer (it offers: memory pids)",
			"cgroup_disable=cpu", "or remove cpu from the site"}},
		{"cpu held by a mounted v1 hierarchy", "hugetlb", []string{"cpu"}, procHybrid, siteLimits{cpuCores: 0.25}, []string{
			"(it offers: hugetlb)", "it is mounted as cgroup v1 at ", "a controller works in one hierarchy at a time",
			"systemd.unified_cgroup_hierarchy=1", "or remove cpu from the site"}},
		{"cpu bound to a v1 hierarchy not mounted here", "hugetlb", nil, procHybrid, siteLimits{cpuCores: 0.25}, []string{
			"it is bound to cgroup v1 hierarchy 1 (see /proc/cgroups), though not mounted here", "systemd.unified_cgroup_hierarchy=1"}},
		{"cpu disabled at boot", "memory", nil, procDisabled, siteLimits{cpuCores: 0.25}, []string{
			"it is disabled at boot: remove cgroup_disable=cpu from the kernel command line"}},
		{"cpu free in the kernel but not passed on to a container", "memory", nil, procFree, siteLimits{cpuCores: 0.25}, []string{
			"does not pass it on (in a container: the host did not delegate it)", "write +cpu to that cgroup's cgroup.subtree_control on the host"}},
		{"a kernel without the controller", "memory", nil, "#subsys_name\thierarchy\tnum_cgroups\tenabled\nmemory\t0\t90\t1\n",
			siteLimits{cpuCores: 0.25}, []string{"this kernel has no cpu controller (it is not in /proc/cgroups)"}},
		{"both limits missing are both reported", "", nil, procHybrid, siteLimits{cpuCores: 1, memBytes: 1 << 30}, []string{
			"cpu = 1 needs", "memory = 1 GiB needs the cgroup v2 memory controller", "(it offers: none)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := fakeV2(t, tc.offered, "")
			m := fakeV1(t, tc.v1...)
			if tc.proc != "" {
				m.kernel = parseProcCgroups(tc.proc)
			}
			d := &cgroupV2{mounts: m, mount: root}
			dirs, err := d.create("replab-lab.eu", tc.lim)
			if err == nil {
				t.Fatalf("created %v, want an error", dirs)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nlacks %q", err, w)
				}
			}
			if _, serr := os.Stat(filepath.Join(root, "replab")); serr == nil {
				t.Error("created the parent cgroup although the limit was refused")
			}
		})
	}
}

func TestCgroupV1WritesLimits(t *testing.T) {
	const site = "replab-lab.eu"
	t.Run("one cgroup per hierarchy with the quota, period and memory limit", func(t *testing.T) {
		m := fakeV1(t, "cpu,cpuacct", "memory", "pids", "name=systemd")
		dirs, err := (&cgroupV1{mounts: m}).create(site, siteLimits{cpuCores: 0.25, memBytes: 256 << 20})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{filepath.Join(m.v1Of("pids").dir, site), filepath.Join(m.v1Of("cpu").dir, site), filepath.Join(m.v1Of("memory").dir, site)}
		if !slices.Equal(dirs, want) {
			t.Fatalf("created %v, want %v", dirs, want)
		}
		for _, f := range []struct{ path, want string }{
			{filepath.Join(dirs[1], "cpu.cfs_period_us"), "100000"},
			{filepath.Join(dirs[1], "cpu.cfs_quota_us"), "25000"},
			{filepath.Join(dirs[2], "memory.limit_in_bytes"), "268435456"},
		} {
			if got := readFile(t, f.path); got != f.want {
				t.Errorf("%s = %q, want %q", f.path, got, f.want)
			}
		}
	})
	t.Run("without pids and without limits only what is mounted is made", func(t *testing.T) {
		m := fakeV1(t, "cpu")
		dirs, err := (&cgroupV1{mounts: m}).create(site, siteLimits{})
		if err != nil || len(dirs) != 1 {
			t.Fatalf("created %v (%v), want the cpu cgroup only", dirs, err)
		}
	})
	for _, tc := range []struct {
		name string
		m    func(t *testing.T) cgroupMounts
		lim  siteLimits
		want []string
	}{
		{"a memory limit without the memory hierarchy", func(t *testing.T) cgroupMounts { return fakeV1(t, "cpu", "pids") },
			siteLimits{memBytes: 256 << 20}, []string{"memory = 256 MiB needs the cgroup v1 memory controller, which is not mounted",
				"mount -t cgroup -o memory", "or remove memory from the site"}},
		{"a memory limit whose controller is in v2 while cpu is in v1", func(t *testing.T) cgroupMounts {
			m := fakeV1(t, "cpu")
			m.v2 = &cgroupMount{dir: fakeV2(t, "memory", "")}
			return m
		}, siteLimits{memBytes: 256 << 20}, []string{"needs the memory controller, which is in the cgroup v2 hierarchy at ",
			"while cpu is mounted as v1 at ", "a lab uses one hierarchy"}},
		{"a limit with no cgroup file system at all", func(t *testing.T) cgroupMounts { return cgroupMounts{} },
			siteLimits{cpuCores: 0.5}, []string{"cpu = 0.5 needs the cgroup cpu controller, but no cgroup file system is mounted",
				"mount -t cgroup2 none /sys/fs/cgroup"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dirs, err := (&cgroupV1{mounts: tc.m(t)}).create(site, tc.lim)
			if err == nil {
				t.Fatalf("created %v, want an error", dirs)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nlacks %q", err, w)
				}
			}
			if len(dirs) != 0 {
				t.Errorf("created %v before refusing", dirs)
			}
		})
	}
}

func TestThreadCgroupsV1(t *testing.T) {
	hybrid, _ := parseMountinfo(strings.NewReader(mountinfoHybrid))
	legacy, _ := parseMountinfo(strings.NewReader(mountinfoLegacy))
	container, _ := parseMountinfo(strings.NewReader("40 30 0:30 /docker/abc /sys/fs/cgroup/cpu ro - cgroup cgroup rw,cpu\n"))
	for _, tc := range []struct {
		name string
		m    cgroupMounts
		proc string
		dirs []string
		want []string
	}{
		{"each site cgroup maps to the thread's cgroup in the same hierarchy", hybrid,
			"8:pids:/\n4:memory:/process_api/942e\n1:cpu:/\n0::/\n",
			[]string{"/sys/fs/cgroup/pids/replab-l.a", "/sys/fs/cgroup/cpu/replab-l.a", "/sys/fs/cgroup/memory/replab-l.a"},
			[]string{"/sys/fs/cgroup/pids", "/sys/fs/cgroup/cpu", "/sys/fs/cgroup/memory/process_api/942e"}},
		{"co-mounted controllers are one hierarchy", legacy,
			"3:cpu,cpuacct:/user.slice\n", []string{"/sys/fs/cgroup/cpu,cpuacct/replab-l.a"}, []string{"/sys/fs/cgroup/cpu,cpuacct/user.slice"}},
		{"a container's part of the hierarchy is relative to its root", container,
			"2:cpu:/docker/abc/init\n", []string{"/sys/fs/cgroup/cpu/replab-l.a"}, []string{"/sys/fs/cgroup/cpu/init"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := threadCgroupsFrom(tc.m, tc.proc, tc.dirs)
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("got %v (%v), want %v", got, err, tc.want)
			}
		})
	}
}

func TestStorageIOLimits(t *testing.T) {
	const site = "replab-lab.eu"
	lim := siteLimits{io: "storage san of node p1: iops and bandwidth"}
	t.Run("v2: the site gets the io controller and io.max one line per device", func(t *testing.T) {
		root := fakeV2(t, debian12Controllers, debian12Controllers)
		dirs, err := (&cgroupV2{mount: root}).create(site, lim)
		if err != nil {
			t.Fatal(err)
		}
		if got := readFile(t, filepath.Join(root, "replab", "cgroup.subtree_control")); !strings.Contains(got, "+io") {
			t.Errorf("parent's subtree_control = %q, want +io in it", got)
		}
		if err := os.WriteFile(filepath.Join(dirs[0], "cgroup.controllers"), []byte("cpu io memory pids"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := setIOLimits(dirs, 7, 3, 100, 2<<20); err != nil {
			t.Fatal(err)
		}
		if got, want := readFile(t, filepath.Join(dirs[0], "io.max")), "7:3 riops=100 wiops=100 rbps=2097152 wbps=2097152"; got != want {
			t.Errorf("io.max = %q, want %q", got, want)
		}
	})
	t.Run("v1: the site gets a blkio cgroup and throttle files for what is limited", func(t *testing.T) {
		m := fakeV1(t, "cpu", "memory", "pids", "blkio")
		dirs, err := (&cgroupV1{mounts: m}).create(site, lim)
		if err != nil {
			t.Fatal(err)
		}
		blkio := filepath.Join(m.v1Of("blkio").dir, site)
		if !slices.Contains(dirs, blkio) {
			t.Fatalf("created %v, want %s among them", dirs, blkio)
		}
		for _, f := range []string{"read_iops_device", "write_iops_device", "read_bps_device", "write_bps_device"} {
			if err := os.WriteFile(filepath.Join(blkio, "blkio.throttle."+f), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := setIOLimits(dirs, 7, 3, 100, 0); err != nil {
			t.Fatal(err)
		}
		for f, want := range map[string]string{"read_iops_device": "7:3 100", "write_iops_device": "7:3 100", "read_bps_device": "", "write_bps_device": ""} {
			if got := readFile(t, filepath.Join(blkio, "blkio.throttle."+f)); got != want {
				t.Errorf("blkio.throttle.%s = %q, want %q", f, got, want)
			}
		}
	})
	t.Run("v1 without blkio mounted: refused before anything is made", func(t *testing.T) {
		m := fakeV1(t, "cpu", "memory", "pids")
		err := (&cgroupV1{mounts: m}).check(lim)
		if err == nil || !strings.Contains(err.Error(), "storage san of node p1: iops and bandwidth needs the cgroup v1 blkio controller") {
			t.Errorf("check: %v", err)
		}
	})
}
