package lab

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"replab/internal/testkit"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// requireV2 returns a cgroup v2 driver on this machine's unified
// hierarchy, whichever driver the machine would choose itself: a hybrid
// machine (v1 controllers, unified hierarchy at /sys/fs/cgroup/unified)
// runs v2's placement, kill and teardown for real, only not its limits.
func requireV2(t *testing.T) *cgroupV2 {
	t.Helper()
	testkit.Need(t, testkit.Lab)
	m, err := systemCgroups()
	if err != nil {
		t.Fatal(err)
	}
	if m.v2 == nil {
		t.Skip("no cgroup2 file system is mounted on this machine")
	}
	return &cgroupV2{mounts: m, mount: m.v2.dir}
}

// upWith starts a lab with the given cgroup driver in a private state
// root and checks at the end that nothing of it remains.
func upWith(t *testing.T, text string, d cgroupDriver) (*Lab, string) {
	t.Helper()
	s := specFrom(t, "cg2", text)
	root := t.TempDir()
	l, err := Up(ctxFor(t, time.Minute), s, Options{StateRoot: root, NoControl: true, cgroups: d})
	if err != nil {
		t.Fatalf("lab up: %v", err)
	}
	t.Cleanup(func() {
		_ = l.Close()
		assertGone(t, root, s.Lab.Name)
	})
	return l, root
}

const twoSitesNoLimits = `
[lab]
name = "NAME"
[site.a]
[site.b]
[[link]]
sites = ["a", "b"]
delay = "1ms"
`

func TestCgroupV2SitesOnThisMachine(t *testing.T) {
	d := requireV2(t)
	l, _ := upWith(t, twoSitesNoLimits, d)
	a := l.Site("a")
	dir := filepath.Join(d.mount, v2Parent, a.Netns)
	if len(a.Cgroups) != 1 || a.Cgroups[0] != dir {
		t.Fatalf("site a's cgroups %v, want the one v2 directory %s", a.Cgroups, dir)
	}
	rel := "/" + v2Parent + "/" + a.Netns // as /proc/PID/cgroup shows it

	t.Run("a command started in a site is born in its cgroup and keeps its credentials", func(t *testing.T) {
		var out bytes.Buffer
		cmd := exec.Command("sh", "-c", "id -u; cat /proc/self/cgroup")
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		if err := a.Start(cmd); err != nil {
			t.Fatalf("start: %v", err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("wait: %v: %s", err, out.String())
		}
		if !strings.HasPrefix(out.String(), "65534\n") || !strings.Contains(out.String(), "\n0::"+rel+"\n") {
			t.Errorf("want uid 65534 in v2 cgroup %s, got:\n%s", rel, out.String())
		}
	})

	t.Run("the parent holds no process and the starting thread stays where it was", func(t *testing.T) {
		if p := cgroupProcs(filepath.Join(d.mount, v2Parent)); len(p) != 0 {
			t.Errorf("processes %v in replab's parent cgroup", p)
		}
		if p := cgroupProcs(dir); len(p) != 0 {
			t.Errorf("processes %v left in site a's cgroup after the command exited", p)
		}
	})

	t.Run("closing the lab kills a process that joined the site's cgroup by PID", func(t *testing.T) {
		// As `replab exec` joins: by PID, from outside the site's namespace,
		// so only the cgroup can find it.
		sleep := exec.Command("sleep", "600")
		if err := sleep.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- sleep.Wait() }()
		if err := joinCgroups(sleep.Process.Pid, a.Cgroups); err != nil {
			_ = sleep.Process.Kill()
			t.Fatalf("join: %v", err)
		}
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(sleep.Process.Pid) + "/cgroup")
		if !strings.Contains(string(b), "0::"+rel+"\n") {
			t.Errorf("joined process is in %q, want %s", b, rel)
		}
		if err := l.Close(); err != nil {
			t.Fatalf("close: %v", err)
		}
		select {
		case err := <-done:
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Errorf("sleep ended with %v, want killed", err)
			}
		case <-time.After(30 * time.Second): // a bound, not a tolerance: the kill is synchronous
			_ = sleep.Process.Kill()
			t.Fatal("the lab closed but the process in its cgroup still runs")
		}
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("site cgroup %s still exists", dir)
		}
		if ents, err := os.ReadDir(filepath.Join(d.mount, v2Parent)); err == nil && !hasSubdir(ents) {
			t.Errorf("empty parent cgroup %s left behind", filepath.Join(d.mount, v2Parent))
		}
	})
}

func hasSubdir(ents []os.DirEntry) bool {
	for _, e := range ents {
		if e.IsDir() {
			return true
		}
	}
	return false
}

func TestCrashedCgroupV2LabIsCleanedUpByDown(t *testing.T) {
	d := requireV2(t)
	for _, lost := range []bool{false, true} {
		name := "from its state file"
		if lost {
			name = "without a state file"
		}
		t.Run(name, func(t *testing.T) {
			s := specFrom(t, "cg2crash", twoSitesNoLimits)
			root := t.TempDir()
			l, err := Up(ctxFor(t, time.Minute), s, Options{StateRoot: root, NoControl: true, cgroups: d})
			if err != nil {
				t.Fatal(err)
			}
			// As TestCrashedLabIsCleanedUpByDownAndByNextStart: kill -9.
			l.emu.Close()
			l.rec.PID, l.rec.PIDStart = 1<<22-1, "0"
			if err := l.rec.save(root); err != nil {
				t.Fatal(err)
			}
			if lost {
				if err := os.RemoveAll(labDir(root, s.Lab.Name)); err != nil {
					t.Fatal(err)
				}
			}
			if cg := listCgroups(objectPrefix(s.Lab.Name)); len(cg) != 2 {
				t.Fatalf("want both sites' v2 cgroups listed before down, have %v", cg)
			}
			done, err := Down(ctxFor(t, time.Minute), root, s.Lab.Name)
			if err != nil {
				t.Fatalf("down: %v", err)
			}
			if !strings.Contains(strings.Join(done, "\n"), "cgroup "+filepath.Join(d.mount, v2Parent, objectName(s.Lab.Name, "a"))) {
				t.Errorf("down did not report removing site a's v2 cgroup: %v", done)
			}
			assertGone(t, root, s.Lab.Name)
		})
	}
}

func TestCgroupV2LimitsOnThisMachine(t *testing.T) {
	d := requireV2(t)
	text := `
[lab]
name = "NAME"
[site.a]
cpu = 0.25
memory = "256MiB"
[site.b]
[[link]]
sites = ["a", "b"]
delay = "1ms"
`
	have := v2Controllers(d.mount)
	if strings.Contains(" "+strings.Join(have, " ")+" ", " cpu ") && strings.Contains(" "+strings.Join(have, " ")+" ", " memory ") {
		// A machine whose v2 hierarchy has the controllers: limits apply.
		l, _ := upWith(t, text, d)
		dir := l.Site("a").Cgroups[0]
		if got, _ := readProc(filepath.Join(dir, "cpu.max")); got != "25000 100000" {
			t.Errorf("cpu.max = %q, want \"25000 100000\"", got)
		}
		if got, _ := readProc(filepath.Join(dir, "memory.max")); got != "268435456" {
			t.Errorf("memory.max = %q, want 268435456", got)
		}
		return
	}
	// Here v1 holds cpu and memory: the limits are refused, not ignored,
	// before anything is created.
	s := specFrom(t, "cg2lim", text)
	root := t.TempDir()
	_, err := Up(ctxFor(t, time.Minute), s, Options{StateRoot: root, NoControl: true, cgroups: d})
	if err == nil {
		t.Fatal("lab up applied no cpu limit and said nothing")
	}
	t.Logf("lab up: %v", err)
	for _, w := range []string{"site a: cpu = 0.25 needs the cgroup v2 cpu controller", "site a: memory = 256 MiB needs the cgroup v2 memory controller",
		filepath.Join(d.mount, "cgroup.controllers"), "remove cpu from the site"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q", w)
		}
	}
	if ns := listNetns(objectPrefix(s.Lab.Name)); len(ns) != 0 {
		t.Errorf("namespaces %v created before the limit was refused", ns)
	}
	assertGone(t, root, s.Lab.Name)
}
