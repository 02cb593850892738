package lab

import (
	"os/exec"
	"replab/internal/testkit"
	"testing"
	"time"
)

// BenchmarkSiteStart is the cost of starting a command in a site (fork,
// exec and wait of /bin/true included) with each cgroup driver: v1 moves
// the forking thread in and out of the site's cgroups around the fork; v2
// forks straight into the cgroup (CLONE_INTO_CGROUP). Each iteration
// starts one command in a v1 lab and one in a v2 lab, so both see the
// same load and v2/v1 is a paired ratio; ns/op is for the pair.
func BenchmarkSiteStart(b *testing.B) {
	testkit.Need(b, testkit.Lab)
	m, err := systemCgroups()
	if err != nil {
		b.Fatal(err)
	}
	if m.v2 == nil {
		b.Skip("no cgroup2 file system is mounted on this machine")
	}
	var sites [2]*Site
	for i, d := range []cgroupDriver{&cgroupV1{mounts: m}, &cgroupV2{mounts: m, mount: m.v2.dir}} {
		s := specFrom(b, "cgbench", twoSitesNoLimits)
		l, err := Up(ctxFor(b, time.Minute), s, Options{StateRoot: b.TempDir(), NoControl: true, cgroups: d})
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		sites[i] = l.Site("a")
	}
	var spent [2]time.Duration
	for b.Loop() {
		for i, site := range sites {
			t0 := time.Now()
			cmd := exec.Command("/bin/true")
			if err := site.Start(cmd); err != nil {
				b.Fatal(err)
			}
			if err := cmd.Wait(); err != nil {
				b.Fatal(err)
			}
			spent[i] += time.Since(t0)
		}
	}
	b.ReportMetric(float64(spent[0].Microseconds())/float64(b.N), "v1_us/start")
	b.ReportMetric(float64(spent[1].Microseconds())/float64(b.N), "v2_us/start")
	b.ReportMetric(float64(spent[1])/float64(spent[0]), "v2/v1")
}
