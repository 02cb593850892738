package runner

import (
	"math"
	"strings"
	"testing"
	"time"

	"replab/internal/engine"
	"replab/internal/engine/postgres"
	"replab/internal/spec"
	"replab/internal/workload"
	"replab/internal/workload/kvinsert"
	"replab/internal/workload/personnel"
)

func provSpec(t *testing.T, links, run string) *spec.Spec {
	t.Helper()
	s, err := spec.Parse("p.toml", []byte(`[lab]
name = "p"
[site.a]
[site.b]
[site.c]
`+links+`
[engine]
kind = "postgres"
[node.p1]
site = "a"
role = "primary"
[node.s1]
site = "c"
role = "standby"
from = "p1"
[workload]
kind = "kv-insert"
preload = 100000
[run]
`+run))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCopyEstimates: the standby's copy (5 MiB of base backup and 100,000
// rows of 150 bytes) crosses a -> b -> c; the slowest direction decides.
func TestCopyEstimates(t *testing.T) {
	const bytes = 5<<20 + 100000*150
	for _, tc := range []struct {
		name  string
		links string
		path  string
		rate  float64 // bit/s
	}{
		{"fast links: the slower hop", "[[link]]\nsites = [\"a\", \"b\"]\nrate = \"100mbit\"\n[[link]]\nsites = [\"b\", \"c\"]\nrate = \"50mbit\"\n", "b->c", 50e6},
		{"a serial line", "[[link]]\nsites = [\"a\", \"b\"]\npreset = \"serial-9600\"\n[[link]]\nsites = [\"b\", \"c\"]\n", "a->b", 9600},
		{"loss below the rate: what TCP keeps up (Mathis)", "[[link]]\nsites = [\"a\", \"b\"]\nrate = \"2mbit\"\ndelay = \"300ms\"\nloss = \"1%\"\n[[link]]\nsites = [\"b\", \"c\"]\n",
			"a->b", 1.22 * 1460 * 8 / (0.6 * 0.1)},
		{"unlimited", "[[link]]\nsites = [\"a\", \"b\"]\n[[link]]\nsites = [\"b\", \"c\"]\n", "", math.Inf(1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := provSpec(t, tc.links, "")
			w, err := workload.NewRegistry(kvinsert.Factory).For(s, "postgres")
			if err != nil {
				t.Fatal(err)
			}
			est := CopyEstimates(s, postgres.Engine{}, w)
			if len(est) != 1 {
				t.Fatalf("%d estimates: %+v", len(est), est)
			}
			e := est[0]
			if e.Node != "s1" || e.From != "p1" || e.Bytes != bytes || e.Path != tc.path || math.Abs(e.RateBps-tc.rate) > 1 {
				t.Errorf("estimate %+v, want %d bytes over %s at %.0f bit/s", e, bytes, tc.path, tc.rate)
			}
			if want := time.Duration(float64(bytes) * 8 / tc.rate * 1e9); !math.IsInf(tc.rate, 1) && (e.Duration-want).Abs() > time.Millisecond {
				t.Errorf("duration %s, want %s", e.Duration, want)
			}
		})
	}
}

func TestProvisionChoice(t *testing.T) {
	serial := "[[link]]\nsites = [\"a\", \"b\"]\npreset = \"serial-9600\"\n[[link]]\nsites = [\"b\", \"c\"]\n"
	lan := "[[link]]\nsites = [\"a\", \"b\"]\nrate = \"100mbit\"\n[[link]]\nsites = [\"b\", \"c\"]\n"
	for _, tc := range []struct {
		links, run string
		fast       bool
	}{
		{serial, "", true}, // auto: hours across the serial line
		{lan, "", false},   // auto: seconds
		{serial, `provision = "link"` + "\n", false},                                                    // asked for
		{lan, `provision = "fast"` + "\n", true},                                                        // asked for
		{"[[link]]\nsites = [\"a\", \"b\"]\ndown = true\n[[link]]\nsites = [\"b\", \"c\"]\n", "", true}, // never, across a link that is down
	} {
		s := provSpec(t, tc.links, tc.run)
		w, _ := workload.NewRegistry(kvinsert.Factory).For(s, "postgres")
		if got := provisionFast(s, CopyEstimates(s, postgres.Engine{}, w)); got != tc.fast {
			t.Errorf("links %q, run %q: fast %v, want %v", tc.links, tc.run, got, tc.fast)
		}
	}
	ws := ProvisionWarnings(provSpec(t, serial, ""), engine.NewRegistry(postgres.Engine{}), workload.NewRegistry(kvinsert.Factory, personnel.Factory))
	if len(ws) != 1 || !strings.Contains(ws[0], "node s1's initial copy from p1 (about 20.2 MB) across a->b at 9.6 kbit/s: about 4h41m0s") {
		t.Errorf("warnings %q", ws)
	}
}
