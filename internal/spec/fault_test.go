package spec

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"replab/internal/faultkind"
)

const faultBase = `[lab]
name = "f"
[site.primary]
[site.eu]
[site.asia]
[[link]]
sites = ["primary", "eu"]
delay = "10ms"
rate = "100mbit"
[[link]]
sites = ["asia", "primary"]
delay = "100ms"
rate = "10mbit"
[engine]
kind = "postgres"
[node.p1]
site = "primary"
role = "primary"
[node.e1]
site = "eu"
role = "standby"
from = "p1"
[workload]
kind = "personnel"
[run]
duration = "60s"
cooldown = "10s"
`

func TestFaultsParseExactly(t *testing.T) {
	src := faultBase + `
[[fault]]
at = "10s"
for = "20s"
link = "primary<->asia"
set = "down"

[[fault]]
at = "0s"
link = " eu -> primary "
set = "delay=400ms loss=1%"

[[fault]]
at = "5s"
for = "1m5s"
link = "primary->eu"
set = ["rate=64kbit", "loss=gemodel 1% 10% 100% 0%"]

[[fault]]
at = "15s"
node = "e1"
do = "kill"
for = "10s"

[[fault]]
at = "30s"
node = "e1"
do = "restart"

[[fault]]
at = "40s"
node = "p1"
do = "pause"

[[fault]]
at = "31s"
link = "asia->primary"
set = "loss = gemodel 1% 10% 100% 0% queue=1bdp"
`
	s := mustParse(t, src)
	link := func(from, to string, both bool) faultkind.Subject {
		return faultkind.Subject{On: faultkind.OnLink, From: from, To: to, Both: both}
	}
	node := func(n string) faultkind.Subject { return faultkind.Subject{On: faultkind.OnNode, Node: n} }
	want := []Fault{
		{At: 10 * time.Second, For: 20 * time.Second, Link: "primary<->asia", From: "primary", To: "asia", Both: true, Kind: "set",
			Act: &faultkind.Set{Subject: link("primary", "asia", true), Changes: []string{"down"}}, Line: 29},
		{At: 0, Link: " eu -> primary ", From: "eu", To: "primary", Kind: "set",
			Act: &faultkind.Set{Subject: link("eu", "primary", false), Changes: []string{"delay=400ms", "loss=1%"}}, Line: 35},
		{At: 5 * time.Second, For: 65 * time.Second, Link: "primary->eu", From: "primary", To: "eu", Kind: "set",
			Act: &faultkind.Set{Subject: link("primary", "eu", false), Changes: []string{"rate=64kbit", "loss=gemodel 1% 10% 100% 0%"}}, Line: 40},
		{At: 15 * time.Second, For: 10 * time.Second, Node: "e1", Kind: "kill", Act: &faultkind.Node{Subject: node("e1"), Do: "kill"}, Line: 46},
		{At: 30 * time.Second, Node: "e1", Kind: "restart", Act: &faultkind.Node{Subject: node("e1"), Do: "restart"}, Line: 52},
		{At: 40 * time.Second, Node: "p1", Kind: "pause", Act: &faultkind.Node{Subject: node("p1"), Do: "pause"}, Line: 57},
		{At: 31 * time.Second, Link: "asia->primary", From: "asia", To: "primary", Kind: "set",
			Act: &faultkind.Set{Subject: link("asia", "primary", false), Changes: []string{"loss = gemodel 1% 10% 100% 0%", "queue=1bdp"}}, Line: 62},
	}
	eq(t, "faults", s.Faults, want)
	if got := s.Errorf("fault[4].do", "x").Error(); got != "s.toml:49: fault[4].do: x" {
		t.Errorf("Errorf points at %q", got)
	}
	if got := s.Faults[0].Describe(); got != "link primary<->asia set down" {
		t.Errorf("the first fault is described as %q", got)
	}

	// resolved-spec.json is the Spec as JSON: the faults are in it, each
	// with its kind and what its kind read.
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Faults []struct {
			Kind string
			Act  map[string]any
		}
	}
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Faults) != len(want) || back.Faults[2].Kind != "set" || fmt.Sprint(back.Faults[2].Act["Changes"]) != "[rate=64kbit loss=gemodel 1% 10% 100% 0%]" ||
		back.Faults[3].Kind != "kill" || back.Faults[3].Act["node"] != "e1" {
		t.Errorf("faults through JSON: %+v", back.Faults)
	}

	// Every sweep point keeps them.
	sw := mustParse(t, src+"\n[sweep]\n\"run.users\" = [3, 30]\n\"fault[1].at\" = [\"10s\", \"5s\"]\n")
	pts, err := sw.Points()
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 4 {
		t.Fatalf("%d points", len(pts))
	}
	for i, p := range pts {
		w := append([]Fault(nil), want...)
		w[0].At = []time.Duration{10 * time.Second, 5 * time.Second}[i%2]
		eq(t, "faults of "+p.Label, p.Spec.Faults, w)
	}
	// A swept duration that leaves a fault past the end is that point's error.
	sw = mustParse(t, src+"\n[sweep]\n\"run.duration\" = [\"60s\", \"12s\"]\n")
	pts, err = sw.Points()
	if len(pts) != 1 || err == nil || !strings.Contains(err.Error(), `s.toml:47: fault[4].at = "15s": a time past the end of the measure phase, which lasts 12s ([run] duration); want at from 0s to below 12s`) {
		t.Errorf("points %d, err %v", len(pts), err)
	}
}

func TestFaultsWithoutEngine(t *testing.T) {
	s := mustParse(t, `[lab]
name = "bare"
[site.a]
[site.b]
[[link]]
sites = ["a", "b"]
[[fault]]
at = "1s"
for = "2s"
link = "b<->a"
set = "loss=5%"
`)
	eq(t, "faults", s.Faults, []Fault{{At: time.Second, For: 2 * time.Second, Link: "b<->a", From: "b", To: "a", Both: true, Kind: "set",
		Act: &faultkind.Set{Subject: faultkind.Subject{On: faultkind.OnLink, From: "b", To: "a", Both: true}, Changes: []string{"loss=5%"}}, Line: 7}})
}

func TestFaultOverlaps(t *testing.T) {
	tests := []struct {
		name          string
		first, second string // two [[fault]] tables' keys
	}{
		{"one direction does not overlap the other",
			"link = \"primary->eu\"\nat = \"1s\"\nset = \"down\"\n", "link = \"eu->primary\"\nat = \"1s\"\nset = \"down\"\n"},
		{"a->b overlaps a<->b",
			"link = \"primary<->eu\"\nat = \"1s\"\nfor = \"5s\"\nset = \"down\"\n", "link = \"eu->primary\"\nat = \"5s\"\nset = \"down\"\n"},
		{"back to back is fine",
			"link = \"primary<->eu\"\nat = \"1s\"\nfor = \"4s\"\nset = \"down\"\n", "link = \"eu->primary\"\nat = \"5s\"\nset = \"down\"\n"},
		{"without for it lasts to the end",
			"link = \"primary->eu\"\nat = \"1s\"\nset = \"loss=1%\"\n", "link = \"primary<->eu\"\nat = \"50s\"\nset = \"down\"\n"},
		{"other links are independent",
			"link = \"primary->eu\"\nat = \"1s\"\nset = \"down\"\n", "link = \"primary->asia\"\nat = \"1s\"\nset = \"down\"\n"},
		{"a restart during a kill",
			"node = \"e1\"\nat = \"1s\"\nfor = \"5s\"\ndo = \"kill\"\n", "node = \"e1\"\nat = \"3s\"\ndo = \"restart\"\n"},
		{"a start after a kill without for",
			"node = \"e1\"\nat = \"1s\"\ndo = \"kill\"\n", "node = \"e1\"\nat = \"20s\"\ndo = \"start\"\n"},
		{"a restart at the same time as another",
			"node = \"e1\"\nat = \"1s\"\ndo = \"restart\"\n", "node = \"e1\"\nat = \"1s\"\ndo = \"restart\"\n"},
		{"restarts one after another",
			"node = \"e1\"\nat = \"1s\"\ndo = \"restart\"\n", "node = \"e1\"\nat = \"2s\"\ndo = \"restart\"\n"},
		{"a start when the stop heals",
			"node = \"e1\"\nat = \"1s\"\nfor = \"4s\"\ndo = \"stop\"\n", "node = \"e1\"\nat = \"5s\"\ndo = \"start\"\n"},
		{"two nodes",
			"node = \"e1\"\nat = \"1s\"\ndo = \"kill\"\n", "node = \"p1\"\nat = \"1s\"\ndo = \"kill\"\n"},
		{"a node's server and its stage",
			"node = \"e1\"\nat = \"1s\"\ndo = \"kill\"\n", "node = \"e1\"\nstage = \"replicat\"\nat = \"1s\"\ndo = \"kill\"\n"},
		{"two stages of a node",
			"node = \"e1\"\nstage = \"pump\"\nat = \"1s\"\ndo = \"kill\"\n", "node = \"e1\"\nstage = \"replicat\"\nat = \"1s\"\ndo = \"kill\"\n"},
		{"one stage twice",
			"node = \"e1\"\nstage = \"replicat\"\nat = \"1s\"\nfor = \"5s\"\ndo = \"pause\"\n", "node = \"e1\"\nstage = \"replicat\"\nat = \"2s\"\ndo = \"restart\"\n"},
	}
	wants := map[string]string{
		"a->b overlaps a<->b":                   `s.toml:36: fault[2].link: overlaps fault[1] (line 29) on eu->primary: fault[1] is from 1s to 6s, this one from 5s to the end of the run; faults on one link direction must not overlap in time`,
		"without for it lasts to the end":       `s.toml:35: fault[2].link: overlaps fault[1] (line 29) on primary->eu: fault[1] is from 1s to the end of the run, this one from 50s to the end of the run; faults on one link direction must not overlap in time (a fault without for lasts to the end of the run: give fault[1] a for)`,
		"a restart during a kill":               `s.toml:36: fault[2].node: overlaps fault[1] (line 29) on node e1: fault[1] is from 1s to 6s, this one at 3s; faults on one node must not overlap in time`,
		"a start after a kill without for":      `s.toml:35: fault[2].node: overlaps fault[1] (line 29) on node e1: fault[1] is from 1s to the end of the run, this one at 20s; faults on one node must not overlap in time (a fault without for lasts to the end of the run: give fault[1] a for)`,
		"a restart at the same time as another": `s.toml:35: fault[2].node: overlaps fault[1] (line 29) on node e1: fault[1] is at 1s, this one at 1s`,
		"one stage twice":                       `s.toml:37: fault[2].node: overlaps fault[1] (line 29) on the replicat of node e1: fault[1] is from 1s to 6s, this one at 2s`,
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("s.toml", []byte(faultBase+"\n[[fault]]\n"+tt.first+"\n[[fault]]\n"+tt.second))
			want := wants[tt.name]
			switch {
			case want == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
				t.Errorf("err = %v\nwant it to contain %s", err, want)
			case want != "" && strings.Count(err.Error(), "\n") != 0:
				t.Errorf("more than one error: %v", err)
			}
		})
	}
}

// A change checked on both directions names the direction it fails on
// when the other takes it.
func TestFaultSetNamesTheDirection(t *testing.T) {
	_, err := Parse("s.toml", []byte(`[lab]
name = "d"
[site.a]
[site.b]
[[link]]
sites = ["a", "b"]
delay = "10ms"
[link.reverse]
rate = "1mbit"
[[fault]]
at = "1s"
link = "b<->a"
set = "queue=1bdp loss=200%"
`))
	want := `s.toml:13: fault[1].set = "queue=1bdp loss=200%": queue = 1bdp: a queue in BDPs needs a rate, and this direction's rate is unlimited; set rate, or give the queue as a size like "64KiB" (direction a->b)
s.toml:13: fault[1].set = "queue=1bdp loss=200%": loss = 200%: must be at least 0% and below 100%; to cut the link use down = true`
	if err == nil || err.Error() != want {
		t.Errorf("err =\n%v\nwant\n%s", err, want)
	}
	// The same change on one good direction is fine.
	mustParse(t, `[lab]
name = "d"
[site.a]
[site.b]
[[link]]
sites = ["a", "b"]
delay = "10ms"
[link.reverse]
rate = "1mbit"
[[fault]]
at = "1s"
link = "b->a"
set = "queue=1bdp"
`)
}

func TestFaultOddValues(t *testing.T) {
	tests := []struct{ keys, want string }{
		{"link = \"->\"\nset = \"down\"", `fault[1].link = "->": want "A<->B"`},
		{"link = \"primary<->\"\nset = \"down\"", `fault[1].link = "primary<->": want "A<->B"`},
		{"link = \"primary<-eu\"\nset = \"down\"", `fault[1].link = "primary<-eu": want "A<->B"`},
		{"link = \"primary->eu->asia\"\nset = \"down\"", `fault[1].link = "primary->eu->asia": want "A<->B"`},
		{"link = \"eu<->eu\"\nset = \"down\"", `fault[1].link = "eu<->eu": a link joins two different sites`},
		{"link = 3\nset = \"down\"", `fault[1].link = 3: want a string like "primary<->asia"`},
		{"link = \"primary<->eu\"\nset = []", `fault[1].set = []: empty; want what changes on the link`},
		{"link = \"primary<->eu\"\nset = \"  \"", `fault[1].set = "  ": empty; want what changes on the link`},
		{"link = \"primary<->eu\"\nset = [1]", `fault[1].set = [1]: want what changes on the link`},
		{"link = \"primary<->eu\"\nset = \"sideways\"", `fault[1].set = "sideways": "sideways": want key=value, or the word down or up`},
		{"link = \"primary<->eu\"\nset = \"dealy=5ms\"", `fault[1].set = "dealy=5ms": dealy = 5ms: unknown key (did you mean "delay"?)`},
		{"link = \"primary<->mars\"\nset = \"mtu=1400\"", `fault[1].link = "primary<->mars": unknown site "mars"; defined sites: primary, eu, asia
s.toml:31: fault[1].set = "mtu=1400": mtu = 1400: the mtu cannot change during a run`},
		{"node = \"e1\"\ndo = 1", `fault[1].do = 1: want one of "kill", "stop", "restart", "pause", "start", "resume"`},
		{"node = \"e1\"\ndo = \"kill\"\nfor = 5", `fault[1].for = 5: want a string with a unit, like "20s"`},
		{"node = \"e1\"\ndo = \"kill\"\nfor = \"-1s\"", `fault[1].for = "-1s": must not be negative`},
	}
	for _, tt := range tests {
		t.Run(tt.keys, func(t *testing.T) {
			_, err := Parse("s.toml", []byte(faultBase+"[[fault]]\nat = \"1s\"\n"+tt.keys+"\n"))
			if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Count(err.Error(), "\n") != strings.Count(tt.want, "\n") {
				t.Errorf("err = %v\nwant only %s", err, tt.want)
			}
		})
	}
}

// TestSiteAndFlappingFaults: isolate finds its site's links; a one-way
// partition is a link fault on one direction; flap keeps every and down.
func TestSiteAndFlappingFaults(t *testing.T) {
	s := mustParse(t, faultBase+`
[[fault]]
at = "10s"
for = "5s"
site = "primary"
do = "isolate"

[[fault]]
at = "20s"
for = "10s"
link = "asia->primary"
do = "flap"
every = "2s"
down = "500ms"

[[fault]]
at = "20s"
for = "10s"
link = "primary->asia"
set = "down"
`)
	asia := faultkind.Subject{On: faultkind.OnLink, From: "asia", To: "primary"}
	want := []Fault{
		{At: 10 * time.Second, For: 5 * time.Second, Site: "primary", Kind: "isolate", Act: &faultkind.Isolate{Site: "primary", Others: []string{"eu", "asia"}}, Line: 29},
		{At: 20 * time.Second, For: 10 * time.Second, Link: "asia->primary", From: "asia", To: "primary", Kind: "flap",
			Act: &faultkind.Flap{Subject: asia, Every: 2 * time.Second, Down: 500 * time.Millisecond, For: 10 * time.Second}, Line: 35},
		{At: 20 * time.Second, For: 10 * time.Second, Link: "primary->asia", From: "primary", To: "asia", Kind: "set",
			Act: &faultkind.Set{Subject: faultkind.Subject{On: faultkind.OnLink, From: "primary", To: "asia"}, Changes: []string{"down"}}, Line: 43},
	}
	eq(t, "faults", s.Faults, want)
	var what []string
	for _, f := range s.Faults {
		what = append(what, f.Describe())
	}
	eq(t, "described", what, []string{"site primary isolate", "link asia->primary flap every 2s down 500ms", "link primary->asia set down"})
}

// cut is a kind a test adds the way the HA managers' will be added: a site
// cut off from some sites (the store's majority) but not from the others
// (its clients), several directions at once.
type cut struct {
	Site string
	From []string
}

func parseCut(r faultkind.Reader, sub faultkind.Subject, s faultkind.Spec) faultkind.Fault {
	list, ok := r.Value("apart_from").([]any)
	if !ok || len(list) == 0 {
		r.Fail("apart_from", `want the sites it is cut off from, like ["eu"]`)
		return nil
	}
	f := &cut{Site: sub.Site}
	for _, v := range list {
		other, _ := v.(string)
		linked := false
		for _, l := range s.Links() {
			linked = linked || l == [2]string{sub.Site, other} || l == [2]string{other, sub.Site}
		}
		if !linked {
			r.Fail("apart_from", "no [[link]] joins %s and %q", sub.Site, other)
			return nil
		}
		f.From = append(f.From, other)
	}
	return f
}

func (f *cut) Describe() string { return "site " + f.Site + " cut from " + strings.Join(f.From, ", ") }

func (f *cut) Parts() []faultkind.Part {
	var out []faultkind.Part
	for _, o := range f.From {
		out = append(out, faultkind.Part{Dir: [2]string{f.Site, o}}, faultkind.Part{Dir: [2]string{o, f.Site}})
	}
	return out
}

func (f *cut) Apply(ctx context.Context, w faultkind.World) (faultkind.Heal, error) {
	for _, o := range f.From {
		if err := w.SetLink(f.Site, o, true, []string{"down"}); err != nil {
			return nil, err
		}
	}
	return func(context.Context) error { return nil }, nil
}

// TestAKindIsOneFile: a kind registered beside the others is read by the
// spec with its own keys, checked against the spec, and held for the
// overlap check, with nothing else changed.
func TestAKindIsOneFile(t *testing.T) {
	kinds := faultkind.Default().Clone()
	if err := kinds.Add(faultkind.Kind{Name: "sever", On: faultkind.OnSite, Keys: []faultkind.Key{{Name: "apart_from"}}, Parse: parseCut}); err != nil {
		t.Fatal(err)
	}
	src := faultBase + `
[[fault]]
at = "10s"
for = "5s"
site = "primary"
do = "sever"
apart_from = ["asia"]
`
	s, err := parse("s.toml", []byte(src), &env{kinds: kinds})
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "fault", s.Faults[0].Act, faultkind.Fault(&cut{Site: "primary", From: []string{"asia"}}))
	_, err = parse("s.toml", []byte(src+`
[[fault]]
at = "12s"
link = "eu->primary"
set = "down"

[[fault]]
at = "12s"
link = "primary->asia"
set = "down"

[[fault]]
at = "1s"
site = "eu"
do = "sever"
apart_from = ["asia"]
`), &env{kinds: kinds})
	// fault[2] is on a direction the cut leaves alone.
	want := `s.toml:43: fault[3].link: overlaps fault[1] (line 29) on primary->asia: fault[1] is from 10s to 15s, this one from 12s to the end of the run; faults on one link direction must not overlap in time
s.toml:50: fault[4].apart_from = ["asia"]: no [[link]] joins eu and "asia"`
	if err == nil || err.Error() != want {
		t.Errorf("err =\n%v\nwant\n%s", err, want)
	}
	// Without the kind, do = "sever" is no action.
	if _, err := Parse("s.toml", []byte(src)); err == nil || !strings.Contains(err.Error(), `fault[1].apart_from: unknown key`) || !strings.Contains(err.Error(), `fault[1].do = "sever": unknown action`) {
		t.Errorf("without the kind: %v", err)
	}
}
