package spec

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"replab/internal/testkit"
)

// TestHostsGolden divides a 2-core machine for every testdata/hosts/*.toml
// and compares what `replab validate` prints of the sites' budgets — or
// the error that refuses the lab — with its .golden file (go test -update
// rewrites them).
func TestHostsGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/hosts/*.toml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no inputs in testdata/hosts: %v", err)
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(strings.TrimSuffix(name, ".toml"), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			s, err := parse(name, data, &env{baseDir: "testdata/hosts", cores: 2})
			var got string
			if err != nil {
				got = "refused:\n" + err.Error() + "\n"
			} else {
				got = "validate prints:\n" + strings.Join(s.HostsLines(), "\n") + "\n"
			}
			testkit.Golden(t, strings.TrimSuffix(f, ".toml")+".golden", []byte(got))
		})
	}
}

// The budgets are a partition of what the machine gives the sites: they
// never add up to more than its cores less the reserve, every site has
// one, and a site with its own cpu keeps it exactly.
func TestBudgetsPartitionTheMachine(t *testing.T) {
	for _, tc := range []struct {
		cores float64
		sites string
	}{
		{2, "[site.a]\n[site.b]\n[site.c]\n"},
		{2, "[site.a]\nweight = 3\n[site.b]\n[site.c]\ncpu = 0.3\n"},
		{16, "[site.a]\n[site.b]\n[site.c]\n[site.d]\n[site.e]\n[site.f]\n[site.g]\n"},
		{3, "[site.a]\nweight = 0.5\n[site.b]\nweight = 2.5\n"},
	} {
		src := "[lab]\nname = \"p\"\nhosts = \"isolated\"\n" + tc.sites
		s, err := parse("p.toml", []byte(src), &env{cores: tc.cores})
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		var sum float64
		for _, st := range s.Sites {
			if st.CPUCores <= 0 {
				t.Errorf("%s: site %s has no budget", src, st.Name)
			}
			if st.Name == "c" && strings.Contains(tc.sites, "cpu = 0.3") && (st.CPUCores != 0.3 || st.CPUBudget) {
				t.Errorf("site c's own cpu 0.3 became %v (budget %v)", st.CPUCores, st.CPUBudget)
			}
			sum += st.CPUCores
		}
		if avail := tc.cores - DefaultReserveCores; sum > avail+1e-9 || sum < avail-0.001*float64(len(s.Sites)) {
			t.Errorf("%s: budgets add up to %v of %v available", src, sum, avail)
		}
	}
}

// A node's CPU does not depend on how many other nodes the lab has: the
// budgets are the sites', and sweeping the number of nodes (the Berkeley
// DB study's replicas) keeps every site's budget.
func TestBudgetsDoNotDependOnTheNumberOfNodes(t *testing.T) {
	src := `[lab]
name = "n"
hosts = "isolated"
[site.master]
[site.r1]
[site.r2]
[[link]]
sites = ["master", "r1"]
[[link]]
sites = ["master", "r2"]
[engine]
kind = "bdbje"
[node.m1]
site = "master"
role = "electable"
[node.r1]
site = "r1"
role = "electable"
[node.r2]
site = "r2"
role = "electable"
[sweep]
nodes = [1, 2, 3]
`
	s, err := parse("n.toml", []byte(src), &env{cores: 2})
	if err != nil {
		t.Fatal(err)
	}
	points, err := s.Points()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range points {
		for i, st := range p.Spec.Sites {
			if st.CPUCores != 0.5 || st.CPUCores != s.Sites[i].CPUCores {
				t.Errorf("point %s: site %s cpu %v, want 0.5 as in the spec", p.Label, st.Name, st.CPUCores)
			}
		}
	}
}
