package spec

import (
	"net/netip"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"replab/internal/linkem"
)

func TestExamplesParseExactly(t *testing.T) {
	tests := []struct {
		file     string
		lab      Lab
		sites    []Site
		a, b     string
		fwd, rev linkem.Params
		linkLine int
	}{
		{
			file:  "two-sites.toml",
			lab:   Lab{Name: "two-sites", Subnet: netip.MustParsePrefix("198.18.0.0/16"), Seed: 1, Hosts: HostsShared},
			sites: []Site{site("primary", "198.18.0.1", 5, "cubic"), site("eu", "198.18.0.2", 6, "cubic")},
			a:     "primary", b: "eu",
			fwd:      linkem.Params{Delay: 25 * time.Millisecond, RateBps: 100_000_000, MTU: 1500, Seed: 1},
			rev:      linkem.Params{Delay: 25 * time.Millisecond, RateBps: 100_000_000, MTU: 1500, Seed: 2},
			linkLine: 8,
		},
		{
			file:  "ship.toml",
			lab:   Lab{Name: "ship", Subnet: netip.MustParsePrefix("198.18.0.0/16"), Seed: 1, Hosts: HostsShared},
			sites: []Site{site("hq", "198.18.0.1", 5, "cubic"), site("ship", "198.18.0.2", 6, "reno")},
			a:     "hq", b: "ship",
			fwd:      linkem.Params{Delay: 300 * time.Millisecond, RateBps: 2_000_000, Loss: 0.01, MTU: 1500, Seed: 1},
			rev:      linkem.Params{Delay: 300 * time.Millisecond, RateBps: 256_000, Loss: 0.01, MTU: 1500, Seed: 2},
			linkLine: 9,
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			path := filepath.Join("..", "..", "examples", tt.file)
			s, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			if s.File != path {
				t.Errorf("File = %q, want %q", s.File, path)
			}
			if s.Lab != tt.lab {
				t.Errorf("Lab = %+v, want %+v", s.Lab, tt.lab)
			}
			if !reflect.DeepEqual(s.Sites, tt.sites) {
				t.Errorf("Sites = %+v\nwant %+v", s.Sites, tt.sites)
			}
			if len(s.Links) != 1 {
				t.Fatalf("%d links, want 1", len(s.Links))
			}
			l := s.Links[0]
			if l.A != tt.a || l.B != tt.b || l.Preset != "" || l.Line != tt.linkLine {
				t.Errorf("link = %s preset %q line %d, want %s<->%s line %d", l.Name(), l.Preset, l.Line, tt.a, tt.b, tt.linkLine)
			}
			if !reflect.DeepEqual(l.Forward, tt.fwd) {
				t.Errorf("forward = %+v\nwant      %+v", l.Forward, tt.fwd)
			}
			if !reflect.DeepEqual(l.Reverse, tt.rev) {
				t.Errorf("reverse = %+v\nwant      %+v", l.Reverse, tt.rev)
			}
		})
	}
}

func site(name, addr string, line int, cc string) Site {
	return Site{Name: name, Address: netip.MustParseAddr(addr), Line: line, TCP: TCP{Congestion: cc}}
}

func TestScenariosParse(t *testing.T) {
	files, _ := filepath.Glob("../../scenarios/*.toml")
	ex, _ := filepath.Glob("../../examples/*.toml")
	files = append(files, ex...)
	if len(files) < 3 {
		t.Fatalf("found only %v", files)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			s, err := Load(f)
			if err != nil {
				t.Fatal(err)
			}
			checkValid(t, s)
		})
	}
}

func TestQuickstart(t *testing.T) {
	s, err := Load("../../scenarios/quickstart.toml")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, st := range s.Sites {
		names = append(names, st.Name)
	}
	if s.Lab.Name != "quickstart" || strings.Join(names, ",") != "primary,eu,asia" || len(s.Links) != 2 {
		t.Fatalf("got lab %q sites %v, %d links", s.Lab.Name, names, len(s.Links))
	}
	want := []struct {
		name  string
		delay time.Duration
		rate  int64
	}{{"primary<->eu", 40 * time.Millisecond, 100_000_000}, {"primary<->asia", 110 * time.Millisecond, 50_000_000}}
	for i, w := range want {
		l := s.Links[i]
		for _, p := range []linkem.Params{l.Forward, l.Reverse} {
			if l.Name() != w.name || p.Delay != w.delay || p.RateBps != w.rate {
				t.Errorf("link %d = %s %v %d, want %s %v %d", i, l.Name(), p.Delay, p.RateBps, w.name, w.delay, w.rate)
			}
		}
	}
}

const twoSites = `
[lab]
name = "t"
[site.a]
[site.b]
`

// TestFeatures: each spec parses, and check sees the result.
func TestFeatures(t *testing.T) {
	tests := []struct {
		name  string
		spec  string
		check func(t *testing.T, s *Spec)
	}{
		{"a preset fills both directions and the link's keys override it", twoSites + `
[[link]]
sites = ["a", "b"]
preset = "transatlantic"
loss = "0.5%"
[link.reverse]
rate = "100mbit"`, func(t *testing.T, s *Spec) {
			l := s.Links[0]
			eq(t, "preset", l.Preset, "transatlantic")
			eq(t, "fwd", l.Forward, linkem.Params{Delay: 37500 * time.Microsecond, RateBps: 1e9, Loss: 0.005, MTU: 1500, Seed: 1})
			eq(t, "rev", l.Reverse, linkem.Params{Delay: 37500 * time.Microsecond, RateBps: 1e8, Loss: 0.005, MTU: 1500, Seed: 2})
		}},
		{"capture is off by default; capture = true takes an optional snap length", twoSites + `
[site.c]
[[link]]
sites = ["a", "b"]
[[link]]
sites = ["a", "c"]
capture = true
[[link]]
sites = ["b", "c"]
capture = true
capture_bytes = 65535`, func(t *testing.T, s *Spec) {
			eq(t, "ab", [2]any{s.Links[0].Capture, s.Links[0].CaptureBytes}, [2]any{false, 0})
			eq(t, "ac", [2]any{s.Links[1].Capture, s.Links[1].CaptureBytes}, [2]any{true, 0})
			eq(t, "bc", [2]any{s.Links[2].Capture, s.Links[2].CaptureBytes}, [2]any{true, 65535})
		}},
		{"forward overrides only sites[0] -> sites[1]", twoSites + `
[[link]]
sites = ["b", "a"]
delay = "10ms"
[link.forward]
delay = "30ms"
down = true`, func(t *testing.T, s *Spec) {
			l := s.Links[0]
			eq(t, "A", l.A, "b")
			eq(t, "fwd delay", l.Forward.Delay, 30*time.Millisecond)
			eq(t, "fwd down", l.Forward.Down, true)
			eq(t, "rev delay", l.Reverse.Delay, 10*time.Millisecond)
			eq(t, "rev down", l.Reverse.Down, false)
		}},
		{"lab seed and link seeds", `
[lab]
name = "t"
seed = 100
[site.a]
[site.b]
[site.c]
[[link]]
sites = ["a", "b"]
[[link]]
sites = ["a", "c"]
[[link]]
sites = ["b", "c"]
seed = 7
[link.forward]
seed = 3`, func(t *testing.T, s *Spec) {
			eq(t, "link1", [2]int64{s.Links[0].Forward.Seed, s.Links[0].Reverse.Seed}, [2]int64{100, 101})
			eq(t, "link2", [2]int64{s.Links[1].Forward.Seed, s.Links[1].Reverse.Seed}, [2]int64{102, 103})
			eq(t, "link3", [2]int64{s.Links[2].Forward.Seed, s.Links[2].Reverse.Seed}, [2]int64{3, 8})
		}},
		{"queue in BDPs uses each direction's rate and delay, at least 2 MTU", twoSites + `
[[link]]
sites = ["a", "b"]
delay = "50ms"
rate = "8mbit"
queue = "1bdp"
[link.reverse]
rate = "9600bit"
queue = "0.5bdp"
mtu = 1000`, func(t *testing.T, s *Spec) {
			eq(t, "fwd queue", s.Links[0].Forward.QueueBytes, int64(100_000)) // 8e6 * 0.1s / 8
			eq(t, "rev queue", s.Links[0].Reverse.QueueBytes, int64(2000))    // 60 bytes -> 2*MTU
			eq(t, "rev mtu", s.Links[0].Reverse.MTU, 1000)
		}},
		{"queue sizes", twoSites + `
[[link]]
sites = ["a", "b"]
queue = "64KiB"
[link.reverse]
queue = "100KB"`, func(t *testing.T, s *Spec) {
			eq(t, "fwd", s.Links[0].Forward.QueueBytes, int64(65536))
			eq(t, "rev", s.Links[0].Reverse.QueueBytes, int64(100_000))
		}},
		{"gemodel loss, jitter with its default distribution", twoSites + `
[[link]]
sites = ["a", "b"]
delay = "20ms"
jitter = "5ms"
loss = "gemodel 1% 10% 100% 0%"
[link.reverse]
jitter_dist = "paretonormal"
reorder = true
loss = "0%"`, func(t *testing.T, s *Spec) {
			f, r := s.Links[0].Forward, s.Links[0].Reverse
			eq(t, "fwd ge", *f.GE, linkem.GilbertElliott{P: 0.01, R: 0.1, LossBad: 1, LossGood: 0})
			eq(t, "fwd dist", f.JitterDist, linkem.JitterUniform)
			eq(t, "fwd jitter", f.Jitter, 5*time.Millisecond)
			eq(t, "rev ge", r.GE, (*linkem.GilbertElliott)(nil))
			eq(t, "rev dist", r.JitterDist, linkem.JitterParetoNormal)
			eq(t, "rev reorder", r.Reorder, true)
			if f.GE == r.GE {
				t.Error("directions share a Gilbert-Elliott model")
			}
		}},
		{"rates: decimal, case, unlimited", twoSites + `
[site.c]
[[link]]
sites = ["a", "b"]
rate = "9.6kbit"
[link.reverse]
rate = "2.5Gbit"
[[link]]
sites = ["a", "c"]
rate = "unlimited"`, func(t *testing.T, s *Spec) {
			eq(t, "fwd", s.Links[0].Forward.RateBps, int64(9600))
			eq(t, "rev", s.Links[0].Reverse.RateBps, int64(2_500_000_000))
			eq(t, "unlimited", s.Links[1].Forward.RateBps, int64(0))
		}},
		{"addresses: explicit ones are kept, the rest allocated around them", `
[lab]
name = "t"
subnet = "10.1.0.0/24"
[site.a]
[site.b]
address = "10.1.0.1"
[site.c]
[site.d]
address = "10.1.0.3"
[site.e]`, func(t *testing.T, s *Spec) {
			var got []string
			for _, st := range s.Sites {
				got = append(got, st.Name+"="+st.Address.String())
			}
			eq(t, "addresses", strings.Join(got, " "), "a=10.1.0.2 b=10.1.0.1 c=10.1.0.4 d=10.1.0.3 e=10.1.0.5")
		}},
		{"site settings", `
[lab]
name = "t"
[site.a]
tcp_congestion = "bbr"
tcp_rmem = "32MiB"
tcp_wmem = "4096 16384 4194304"
rmem_max = "64MiB"
wmem_max = "1MB"
tcp_window_scaling = false
tcp_slow_start_after_idle = true
cpu = 0.5
memory = "512MiB"
[site.b]
cpu = 2
tcp_rmem = "64KiB"
tcp_wmem = "4KiB 64KiB 8MiB"`, func(t *testing.T, s *Spec) {
			f, tr := false, true
			eq(t, "a.TCP", s.Sites[0].TCP, TCP{Congestion: "bbr", Rmem: [3]int64{4096, 131072, 32 << 20}, Wmem: [3]int64{4096, 16384, 4194304},
				RmemMax: 64 << 20, WmemMax: 1_000_000, WindowScaling: &f, SlowStartAfterIdle: &tr})
			eq(t, "a.cpu", s.Sites[0].CPUCores, 0.5)
			eq(t, "a.mem", s.Sites[0].MemoryBytes, int64(512<<20))
			eq(t, "b.cpu", s.Sites[1].CPUCores, 2.0)
			eq(t, "b.rmem", s.Sites[1].TCP.Rmem, [3]int64{4096, 65536, 65536})
			eq(t, "b.wmem", s.Sites[1].TCP.Wmem, [3]int64{4096, 65536, 8 << 20})
		}},
		{"links may be inline tables; unlinked sites are allowed", `
link = [{ sites = ["a", "b"], delay = "1ms", reverse = { delay = "2ms" } }]
lab = { name = "t" }
site = { a = {}, b = {}, c = {} }`, func(t *testing.T, s *Spec) {
			eq(t, "sites", len(s.Sites), 3)
			eq(t, "fwd", s.Links[0].Forward.Delay, time.Millisecond)
			eq(t, "rev", s.Links[0].Reverse.Delay, 2*time.Millisecond)
		}},
		{"no links at all", twoSites, func(t *testing.T, s *Spec) { eq(t, "links", len(s.Links), 0) }},
		{"durations with a space and in microseconds", twoSites + `
[[link]]
sites = ["a", "b"]
delay = "250 us"
jitter = "0"`, func(t *testing.T, s *Spec) {
			eq(t, "delay", s.Links[0].Forward.Delay, 250*time.Microsecond)
			eq(t, "dist", s.Links[0].Forward.JitterDist, linkem.JitterNone)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse("t.toml", []byte(tt.spec))
			if err != nil {
				t.Fatal(err)
			}
			checkValid(t, s)
			tt.check(t, s)
		})
	}
}

func TestTraceIsRelativeToTheSpec(t *testing.T) {
	s, err := Parse("testdata/with-trace.toml", []byte(twoSites+`
[[link]]
sites = ["a", "b"]
trace = "cell.trace"
queue = "2bdp"
delay = "10ms"`))
	if err != nil {
		t.Fatal(err)
	}
	tr := s.Links[0].Forward.Trace
	if tr == nil || len(tr.Opportunity) != 10 || tr.PeriodMs != 9 {
		t.Fatalf("trace = %+v", tr)
	}
	// 10 opportunities of 1500 bytes per 9 ms = 13.33 Mbit/s; 2 BDP over 20 ms RTT.
	eq(t, "queue", s.Links[0].Forward.QueueBytes, bdpQueue(2, tr.MeanRateBps(), 10*time.Millisecond, 1500))
	eq(t, "reverse shares the trace", s.Links[0].Reverse.Trace, tr)
}

func TestErrorsAreSortedAndCapped(t *testing.T) {
	var b strings.Builder
	b.WriteString(twoSites + "[[link]]\nsites = [\"a\", \"b\"]\n")
	for i := 0; i < 30; i++ {
		b.WriteString("x" + strings.Repeat("y", i) + " = 1\n")
	}
	_, err := Parse("cap.toml", []byte(b.String()))
	list, ok := err.(ErrorList)
	if !ok || len(list) != 30 {
		t.Fatalf("err = %T with %d entries", err, len(list))
	}
	for i := 1; i < len(list); i++ {
		if list[i].Line < list[i-1].Line {
			t.Fatalf("not sorted by line: %d after %d", list[i].Line, list[i-1].Line)
		}
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != MaxErrors+1 || lines[MaxErrors] != "cap.toml: 10 more errors not shown" {
		t.Errorf("printed %d lines, last %q", len(lines), lines[len(lines)-1])
	}
}

func eq[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s = %+v, want %+v", what, got, want)
	}
}

// checkValid asserts what every successfully parsed spec guarantees.
func checkValid(t testing.TB, s *Spec) {
	t.Helper()
	if !labNameRE.MatchString(s.Lab.Name) || !s.Lab.Subnet.IsValid() {
		t.Fatalf("bad lab %+v", s.Lab)
	}
	if len(s.Sites) < 2 {
		t.Fatalf("%d sites", len(s.Sites))
	}
	names := map[string]bool{}
	addrs := map[netip.Addr]string{}
	for _, st := range s.Sites {
		if names[st.Name] || !siteNameRE.MatchString(st.Name) {
			t.Fatalf("bad or repeated site name %q", st.Name)
		}
		names[st.Name] = true
		if !st.Address.Is4() || !s.Lab.Subnet.Contains(st.Address) {
			t.Fatalf("site %s address %v not in %v", st.Name, st.Address, s.Lab.Subnet)
		}
		if other, dup := addrs[st.Address]; dup {
			t.Fatalf("sites %s and %s share %v", other, st.Name, st.Address)
		}
		addrs[st.Address] = st.Name
		if st.TCP.Congestion == "" || st.CPUCores < 0 || st.MemoryBytes < 0 {
			t.Fatalf("site %s: %+v", st.Name, st)
		}
	}
	pairs := map[[2]string]bool{}
	for _, l := range s.Links {
		if !names[l.A] || !names[l.B] || l.A == l.B {
			t.Fatalf("link %s joins unknown or equal sites", l.Name())
		}
		k := [2]string{min(l.A, l.B), max(l.A, l.B)}
		if pairs[k] {
			t.Fatalf("link %s twice", l.Name())
		}
		pairs[k] = true
		for _, p := range []linkem.Params{l.Forward, l.Reverse} {
			checkParams(t, p)
		}
	}
}

func checkParams(t testing.TB, p linkem.Params) {
	t.Helper()
	ok := p.Delay >= 0 && p.Delay <= MaxDelay && p.Jitter >= 0 && p.Jitter <= MaxDelay &&
		(p.RateBps == 0 || p.RateBps >= MinRateBps && p.RateBps <= MaxRateBps) &&
		p.QueueBytes >= 0 && p.QueueBytes <= MaxQueue &&
		p.Loss >= 0 && p.Loss < 1 && p.MTU >= MinMTU && p.MTU <= MaxMTU
	if p.GE != nil {
		for _, v := range []float64{p.GE.P, p.GE.R, p.GE.LossBad, p.GE.LossGood} {
			ok = ok && v >= 0 && v <= 1
		}
	}
	if !ok {
		t.Fatalf("invalid params %+v", p)
	}
}
