package lab

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"replab/internal/testkit"
)

// cpuLimit reads a running site's CFS quota and period (µs) from its cgroup,
// v1 or v2; ok is false when the site has none.
func cpuLimit(t *testing.T, s *Site) (quota, period int64, ok bool) {
	t.Helper()
	for _, cg := range s.Cgroups {
		var q, p string
		switch {
		case isV2(cg): // "QUOTA PERIOD" in one file
			max, err := readProc(filepath.Join(cg, "cpu.max"))
			if err != nil {
				continue
			}
			q, p, _ = strings.Cut(max, " ")
		case filepath.Base(filepath.Dir(cg)) == "cpu":
			q, _ = readProc(filepath.Join(cg, "cpu.cfs_quota_us"))
			p, _ = readProc(filepath.Join(cg, "cpu.cfs_period_us"))
		default:
			continue
		}
		qn, err1 := strconv.ParseInt(q, 10, 64)
		pn, err2 := strconv.ParseInt(p, 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("site %s: cpu limit %q / %q is not two numbers", s.Name, q, p)
		}
		return qn, pn, true
	}
	return 0, 0, false
}

// In an isolated lab every site's budget — divided from this machine's
// cores by weight, or the site's own cpu — is its cgroup's CPU limit.
func TestIsolatedHostsBudgetsAreApplied(t *testing.T) {
	t.Parallel()
	testkit.Need(t, testkit.Lab)
	s := specFrom(t, "hosts", `
[lab]
name = "NAME"
hosts = "isolated"
reserve = 0.5
[site.a]
weight = 2
[site.b]
[site.c]
cpu = 0.2
[[link]]
sites = ["a", "b"]
[[link]]
sites = ["a", "c"]
`)
	l := up(t, s)
	var budgets float64
	for _, st := range s.Sites {
		if st.CPUCores <= 0 || st.CPUBudget == (st.Name == "c") {
			t.Fatalf("site %s: cpu %v, budget %v: want a budget for a and b, c's own 0.2", st.Name, st.CPUCores, st.CPUBudget)
		}
		budgets += st.CPUCores
		site := l.Site(st.Name)
		quota, period, ok := cpuLimit(t, site)
		if !ok {
			t.Fatalf("site %s has no cpu cgroup among %v", st.Name, site.Cgroups)
		}
		want, wantPeriod, err := cfsQuota(st.CPUCores)
		if err != nil {
			t.Fatal(err)
		}
		if quota != want || period != wantPeriod {
			t.Errorf("site %s: cgroup cpu limit %d µs per %d µs, want its budget of %g cores: %d per %d", st.Name, quota, period, st.CPUCores, want, wantPeriod)
		}
	}
	if a, b := l.Site("a").CPUCores, l.Site("b").CPUCores; a < 2*b-0.0011 || a > 2*b+0.0011 {
		t.Errorf("site a (weight 2) has %g cores, b (weight 1) %g: want twice as many", a, b)
	}
	if avail := s.Lab.MachineCores - 0.5; budgets > avail+1e-9 {
		t.Errorf("budgets add up to %g cores, more than the %g this machine gives the sites", budgets, avail)
	}
}
