package spec

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const sweepBase = `[lab]
name = "s"
[site.a]
[site.b]
[[link]]
sites = ["a", "b"]
delay = "10ms"
rate = "9600bit"
[engine]
kind = "postgres"
[node.p]
site = "a"
role = "primary"
[workload]
kind = "personnel"
[run]
users = 3
`

func TestSweepExpandsTheMatrixInOrder(t *testing.T) {
	s, err := Parse("s.toml", []byte(sweepBase+`
[sweep]
"link[1].rate" = ["9.6kbit", "115.2kbit"]
"run.users" = [3, 30, 300]
`))
	if err != nil {
		t.Fatal(err)
	}
	pts, err := s.Points()
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 6 {
		t.Fatalf("%d points, want 6", len(pts))
	}
	wantRates := []int64{9600, 9600, 9600, 115200, 115200, 115200}
	wantUsers := []int{3, 30, 300, 3, 30, 300}
	for i, p := range pts {
		if p.Spec.Links[0].Forward.RateBps != wantRates[i] || p.Spec.Links[0].Reverse.RateBps != wantRates[i] || p.Spec.Run.Users != wantUsers[i] {
			t.Errorf("point %d (%s): rate %d users %d", i, p.Label, p.Spec.Links[0].Forward.RateBps, p.Spec.Run.Users)
		}
	}
	if pts[4].Label != `link[1].rate="115.2kbit", run.users=30` {
		t.Errorf("label %q", pts[4].Label)
	}
	// The base spec is untouched.
	if s.Links[0].Forward.RateBps != 9600 || s.Run.Users != 3 {
		t.Errorf("base spec changed")
	}
}

func TestSweepCanSetKeysTheSpecOmits(t *testing.T) {
	s, err := Parse("s.toml", []byte(sweepBase+`
[sweep]
"link[1].reverse.loss" = ["0%", "1%"]
"scheme.replication" = ["async", "sync"]
`))
	if err != nil {
		t.Fatal(err)
	}
	pts, err := s.Points()
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 4 || pts[3].Spec.Links[0].Reverse.Loss != 0.01 || pts[3].Spec.Links[0].Forward.Loss != 0 || pts[3].Spec.Scheme.Replication != "sync" {
		t.Errorf("points %+v", pts[3].Spec.Links[0])
	}
}

func TestSweepErrors(t *testing.T) {
	cases := map[string]string{
		`"run.users" = []`:                   `sweep."run.users" = []: want a non-empty list of values`,
		`"link[0].rate" = ["1mbit"]`:         `indices count from 1`,
		`"lab.name" = ["x", "y"]`:            `cannot be swept`,
		`"link[1].rate" = ["fast", "1mbit"]`: `sweep point link[1].rate="fast"`,
		`"link[3].rate" = ["1mbit"]`:         `there is no element 3`,
	}
	for line, want := range cases {
		s, err := Parse("s.toml", []byte(sweepBase+"[sweep]\n"+line+"\n"))
		if err == nil {
			_, err = s.Points()
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", line, err, want)
		}
	}
}

func TestRepetitionTargets(t *testing.T) {
	s, err := Parse("r.toml", []byte(sweepBase+"confidence = 0.95\nrelative_error = 0.05\nmax_repetitions = 12\n"))
	if err != nil {
		t.Fatal(err)
	}
	r := s.Run
	if r.Repetitions != DefaultPilot || r.Confidence != 0.95 || r.RelativeError != 0.05 || r.MaxRepetitions != 12 {
		t.Errorf("run %+v", r)
	}
	if _, err := Parse("r.toml", []byte(sweepBase+"confidence = 0.95\n")); err == nil || !strings.Contains(err.Error(), "needs relative_error") {
		t.Errorf("confidence alone: %v", err)
	}
	s, err = Parse("r.toml", []byte(sweepBase+"repetitions = 5\nduration = \"1m\"\n"))
	if err != nil || s.Run.Repetitions != 5 || s.Run.Duration != time.Minute {
		t.Errorf("repetitions = 5: %v %+v", err, s.Run)
	}
}

// TestPointsReportsEveryBadPoint: each bad combination is reported, with
// the error at the [sweep] line of the value that caused it, and the good
// combinations are still returned.
func TestPointsReportsEveryBadPoint(t *testing.T) {
	s, err := Parse("sw.toml", []byte(`[lab]
name = "x"
[site.a]
[site.b]
[[link]]
sites = ["a", "b"]
[sweep]
"link[1].delay" = ["5ms", "fast", "10"]
`))
	if err != nil {
		t.Fatal(err)
	}
	points, err := s.Points()
	if len(points) != 1 || points[0].Label != `link[1].delay="5ms"` {
		t.Errorf("good points %v", points)
	}
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{`sweep point link[1].delay="fast":`, `sweep point link[1].delay="10":`, "sw.toml:8: link[1].delay"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("no %q in:\n%v", want, err)
		}
	}
}

// TestSweepPointErrorsQuoteTheSweptValue: an error about a swept field
// quotes the point's value at its [sweep] line, not the base spec's value
// at its own line; an error about a field the sweep does not touch still
// points at the base spec.
func TestSweepPointErrorsQuoteTheSweptValue(t *testing.T) {
	s, err := Parse("sw.toml", []byte(sweepBase+`duration = "15s"
[sweep]
"run.duration" = ["0.5s", "10s"]
"run.users" = [0, 2]
`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Points()
	if err == nil {
		t.Fatal("no error")
	}
	got := err.Error()
	for _, want := range []string{
		`sw.toml:20: run.duration = "0.5s": too short`,
		`sw.toml:21: run.users = 0: want between 1 and 10000 users`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in:\n%s", want, got)
		}
	}
	for _, bad := range []string{`"15s"`, `users = 3`, "sw.toml:17:", "sw.toml:18:"} {
		if strings.Contains(got, bad) {
			t.Errorf("the base spec's %s quoted in:\n%s", bad, got)
		}
	}
	if n := strings.Count(got, "sweep point "); n != 3 {
		t.Errorf("%d bad points, want 3:\n%s", n, got)
	}
}

// TestLoadForCheckKeepsWhatItCouldRead: a spec with wrong values comes
// back with its errors and as far as it could be read, so that its engine
// and workload can still be checked; Load and Parse return no spec.
func TestLoadForCheckKeepsWhatItCouldRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.toml")
	if err := os.WriteFile(path, []byte(sweepBase+"duration = \"0.5s\"\nthink = \"1s\"\nrate = \"100/s\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := LoadForCheck(path)
	if err == nil || s == nil {
		t.Fatalf("spec %v, error %v: want both", s, err)
	}
	if len(s.ReadErrors()) != 2 || s.ReadErrors().Error() != err.Error() {
		t.Errorf("the spec carries %v, the error is %v", s.ReadErrors(), err)
	}
	if s.Engine == nil || s.Engine.Kind != "postgres" || s.Workload == nil || s.Workload.Kind != "personnel" || len(s.Nodes) != 1 {
		t.Errorf("engine, nodes or workload not read: %+v", s)
	}
	if s, err := Load(path); s != nil || err == nil {
		t.Errorf("Load: spec %v, error %v: want only the error", s, err)
	}
}

// "nodes" keeps the first N nodes as written: the number of replicas is
// swept; a count out of range is an error at the sweep's line.
func TestSweepNodes(t *testing.T) {
	base := strings.Replace(sweepBase, "[workload]", `[node.s1]
site = "b"
role = "standby"
from = "p"
[node.s2]
site = "b"
role = "standby"
from = "p"
[workload]`, 1)
	s, err := Parse("s.toml", []byte(base+"[sweep]\nnodes = [1, 3, 2]\n"))
	if err != nil {
		t.Fatal(err)
	}
	pts, err := s.Points()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range pts {
		var names []string
		for _, n := range p.Spec.Nodes {
			names = append(names, n.Name)
		}
		got = append(got, p.Label+": "+strings.Join(names, " "))
	}
	if want := "nodes=1: p|nodes=3: p s1 s2|nodes=2: p s1"; strings.Join(got, "|") != want {
		t.Errorf("points %q, want %q", strings.Join(got, "|"), want)
	}
	if len(s.Nodes) != 3 {
		t.Errorf("the base spec lost nodes: %d", len(s.Nodes))
	}
	s, err = Parse("s.toml", []byte(base+"[sweep]\nnodes = [1, 4]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Points(); err == nil || !strings.Contains(err.Error(), "s.toml:27: sweep.nodes: nodes = 4: want a whole number from 1 to 3") {
		t.Errorf("nodes = 4 of 3: %v", err)
	}
}

func TestSweepCasesSetSeveralKeysAtOnce(t *testing.T) {
	s, err := Parse("s.toml", []byte(sweepBase+`
[sweep]
"run.users" = [3, 30]
case = [
  { name = "slow", "link[1].rate" = "9.6kbit", "link[1].delay" = "100ms" },
  { name = "fast", "link[1].rate" = "115.2kbit" },
]
`))
	if err != nil {
		t.Fatal(err)
	}
	pts, err := s.Points()
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 4 {
		t.Fatalf("%d points, want 4", len(pts))
	}
	want := []struct {
		label string
		rate  int64
		delay time.Duration
	}{
		{`run.users=3, case="slow"`, 9600, 100 * time.Millisecond},
		{`run.users=3, case="fast"`, 115200, 10 * time.Millisecond},
		{`run.users=30, case="slow"`, 9600, 100 * time.Millisecond},
		{`run.users=30, case="fast"`, 115200, 10 * time.Millisecond},
	}
	for i, p := range pts {
		l := p.Spec.Links[0].Forward
		if p.Label != want[i].label || l.RateBps != want[i].rate || l.Delay != want[i].delay || p.Values["case"] != strings.Split(strings.Split(want[i].label, `case="`)[1], `"`)[0] {
			t.Errorf("point %d: %q rate %d delay %s values %v; want %+v", i, p.Label, l.RateBps, l.Delay, p.Values, want[i])
		}
	}
}

func TestSweepCaseErrors(t *testing.T) {
	for _, c := range []struct{ sweep, want string }{
		{`case = [{ "link[1].rate" = "9.6kbit" }]`, "case 1: give it a name"},
		{`case = [{ name = "a" }, { name = "a" }]`, `case 2: the name "a" is taken`},
		{`case = ["slow"]`, "case 1: want a table"},
		{`case = [{ name = "a", "lab.name" = "x" }]`, `case "a": lab.name cannot be set`},
		{`case = [{ name = "a", "run.users" = "many" }]`, `sweep point case="a"`},
	} {
		s, err := Parse("s.toml", []byte(sweepBase+"\n[sweep]\n"+c.sweep+"\n"))
		if err == nil {
			_, err = s.Points()
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.sweep, err, c.want)
		}
	}
}
