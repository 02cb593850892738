package engine

import (
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestCoreKnowsNoEngine keeps the layers apart, tests aside, with an
// allow list for each side: what its packages may depend on, even
// indirectly, besides the standard library. A dependency that is on
// neither list fails the test until someone decides which side it is on.
//
//   - The core (runner, driver, monitor, lagprobe, spec, the workloads,
//     report, stats, and target mode's target and agent) depends on no
//     database driver and no engine package: on the contract (engine)
//     and the engines' kit (enginekit, held to the core's list because
//     the core uses it). A new engine is one package plus one
//     registration line in cmd/replab/engines.go, target mode included.
//   - An engine depends on no workload, runner, report, driver or other
//     engine: on the contract, the kit, the lab and the leaf packages it
//     runs servers with.
//
// Test kits (packages named …test, imported only by tests) are left out,
// as _test files are.
func TestCoreKnowsNoEngine(t *testing.T) {
	const m = "replab/internal/"
	for _, side := range []struct {
		name     string
		packages []string
		replab   []string // the module's packages it may depend on
		modules  []string // the modules it may depend on
	}{
		{
			name: "core",
			packages: []string{m + "runner", m + "driver", m + "monitor", m + "lagprobe", m + "spec", m + "workload/...", m + "enginekit",
				m + "report", m + "stats", m + "target", m + "agent"},
			replab: []string{"agent", "clock", "driver", "engine", "enginekit", "check", "fault", "faultkind", "history", "lab", "lagprobe", "linkem", "linkem/emu",
				"linkem/pcap", "livemetrics", "monitor", "netcheck", "pagedata", "pagestats", "report", "runner", "spec", "stats",
				"storage", "tcpdiag", "units", "workload", "workload/*", "xrd"},
			modules: []string{"github.com/HdrHistogram/hdrhistogram-go", "github.com/pelletier/go-toml/v2",
				// livemetrics: OpenMetrics
				"github.com/prometheus/", "github.com/beorn7/perks", "github.com/cespare/xxhash/v2", "github.com/munnerz/goautoneg",
				"google.golang.org/protobuf", "github.com/pandatix/go-abnf",
				// the lab: TUN devices, sockets
				"golang.org/x/sys", "golang.org/x/net", "golang.org/x/sync", "golang.zx2c4.com/wireguard"},
		},
		{
			name:     "engines",
			packages: []string{m + "engine/..."},
			replab: []string{"engine", "engine/pgpipe", "enginekit", "clock", "lab", "linkem", "linkem/emu", "linkem/pcap",
				"netcheck", "storage", "spec", "faultkind", "units", "pagedata", "xrd", "pipeline", "pipeline/trail"},
			modules: []string{"github.com/jackc/", "github.com/go-sql-driver/mysql", "filippo.io/edwards25519",
				"github.com/klauspost/compress", "github.com/HdrHistogram/hdrhistogram-go", "github.com/pelletier/go-toml/v2",
				"golang.org/x/sys", "golang.org/x/net", "golang.org/x/sync", "golang.org/x/text", "golang.zx2c4.com/wireguard"},
		},
	} {
		t.Run(side.name, func(t *testing.T) {
			deps := listDeps(t, side.packages)
			if len(deps) == 0 {
				t.Fatalf("go list found no packages for %v", side.packages)
			}
			for pkg, ds := range deps {
				if isTestKit(pkg) {
					continue
				}
				own := strings.TrimPrefix(pkg, m)
				said := map[string]bool{} // one line per module outside replab
				for _, d := range ds {
					if isStandard(d) || allowed(d, m, side.replab, side.modules) {
						continue
					}
					if !strings.HasPrefix(d, m) {
						d = strings.Join(strings.SplitN(d, "/", 4)[:min(3, strings.Count(d, "/")+1)], "/")
					}
					if !said[d] {
						said[d] = true
						t.Errorf("%s depends on %s, which the %s may not", own, d, side.name)
					}
				}
			}
			if t.Failed() {
				t.Logf("the %s may depend on the standard library, replab's %s, and the modules %s", side.name,
					strings.Join(side.replab, ", "), strings.Join(side.modules, ", "))
			}
		})
	}
}

// listDeps runs go list for patterns: each package's dependencies,
// direct and indirect. Not being able to list them fails the test: a
// check that cannot run has not passed.
func listDeps(t *testing.T, patterns []string) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-f", "{{.ImportPath}}{{range .Deps}} {{.}}{{end}}"}, patterns...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", strings.Join(patterns, " "), err, stderr.String())
	}
	deps := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 {
			deps[f[0]] = f[1:]
		}
	}
	return deps
}

// isStandard says whether an import path is the standard library's: its
// first element has no dot (and it is not this module's).
func isStandard(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".") && first != "replab"
}

func isTestKit(pkg string) bool {
	return strings.HasSuffix(pkg[strings.LastIndex(pkg, "/")+1:], "test")
}

// allowed says whether dep is on a side's lists: one of the module's
// packages named there ("workload/*": its subpackages, one level), or a
// package of a module named there (a prefix ending in "/" covers an
// owner's modules).
func allowed(dep, m string, replab, modules []string) bool {
	if own, ok := strings.CutPrefix(dep, m); ok {
		if slices.Contains(replab, own) {
			return true
		}
		parent := own[:max(strings.LastIndex(own, "/"), 0)]
		return parent != "" && slices.Contains(replab, parent+"/*") && !strings.Contains(own[len(parent)+1:], "/")
	}
	for _, mod := range modules {
		if dep == mod || strings.HasPrefix(dep, strings.TrimSuffix(mod, "/")+"/") {
			return true
		}
	}
	return false
}

func TestLayeringAllowList(t *testing.T) {
	const m = "replab/internal/"
	replab := []string{"engine", "workload", "workload/*"}
	modules := []string{"github.com/prometheus/", "golang.org/x/sys"}
	for dep, want := range map[string]bool{
		m + "engine":                     true,
		m + "workload/kvinsert":          true,
		m + "workload/kvinsert/deeper":   false,
		m + "engine/postgres":            false,
		m + "enginekit":                  false,
		"github.com/prometheus/common":   true,
		"golang.org/x/sys/unix":          true,
		"golang.org/x/sysadmin":          false,
		"github.com/jackc/pgx/v5/pgconn": false,
	} {
		if got := allowed(dep, m, replab, modules); got != want {
			t.Errorf("allowed(%s) = %v, want %v", dep, got, want)
		}
	}
	for path, want := range map[string]bool{"net/http": true, "vendor/golang.org/x/net/dns/dnsmessage": true,
		"golang.org/x/sys/unix": false, "replab/internal/engine": false} {
		if got := isStandard(path); got != want {
			t.Errorf("isStandard(%s) = %v, want %v", path, got, want)
		}
	}
}
