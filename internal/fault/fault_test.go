package fault

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"replab/internal/faultkind"
	"replab/internal/linkem"
	"replab/internal/spec"
)

// flat builds a series of n seconds from s0 with commits per second from
// f(s).
func flat(s0, n int, f func(s int) int64) []Second {
	var out []Second
	for s := s0; s < s0+n; s++ {
		out = append(out, Second{S: float64(s), Commits: f(s), P99Ms: float64(10 + f(s)%7), MaxMs: 20})
	}
	return out
}

func TestMeasure(t *testing.T) {
	// 100 tps; a partition from 10 s to 20 s stops commits; they come back
	// at 22 s (a backlog drains first).
	series := flat(-5, 45, func(s int) int64 {
		switch {
		case s >= 10 && s < 20:
			return 0
		case s >= 20 && s < 22:
			return 50
		}
		return 100
	})
	heal := 20.0
	lag := map[string][]LagSecond{"e1": {{S: 5, P99Ms: 40}, {S: 9, P99Ms: 45}, {S: 12, P99Ms: 9000}, {S: 21, P99Ms: 3000}, {S: 35, P99Ms: 40}}}
	backlog := map[string][]Backlog{"e1": {{S: 9, Value: 100, Unit: "bytes"}, {S: 15, Value: 80000, Unit: "bytes"}, {S: 31, Value: 1e9, Unit: "bytes"}}}
	gaps := []Gap{{FromS: 2, ToS: 2.5}, {FromS: 9.9, ToS: 20.2}, {FromS: 35, ToS: 36}}
	got := Measure(Span{Fault: 0, What: "link a<->b down", AtS: 10, HealS: &heal}, series, gaps, lag, backlog, -5, 40, math.Inf(1))
	if got.Before.TPS != 100 || got.Before.FromS != 0 || got.During.TPS != 0 || got.After.TPS != 90 {
		t.Errorf("windows: before %+v during %+v after %+v", got.Before, got.During, got.After)
	}
	if got.RecoverS == nil || *got.RecoverS != 2 {
		t.Errorf("recover %v, want 2 s after the heal", got.RecoverS)
	}
	if math.Abs(got.UnavailableS-10.3) > 1e-9 {
		t.Errorf("unavailable %.2f s, want the 10.3 s without a commit across the fault", got.UnavailableS)
	}
	if got.LagPeakMs["e1"] != 9000 || got.LagBeforeMs["e1"] != 45 {
		t.Errorf("lag peak %v before %v", got.LagPeakMs, got.LagBeforeMs)
	}
	if got.BacklogPeak["e1"] != 80000 || got.BacklogUnit["e1"] != "bytes" {
		t.Errorf("backlog peak %v %v, want 80000 bytes (the sample after the window does not count)", got.BacklogPeak, got.BacklogUnit)
	}

	// A standby killed at 3 s and started at 5 s, near the end of a run
	// whose series end at 6 s: the commits it missed become visible in
	// the catch-up after the run (its lag series goes on), with the lag of
	// the time it was down. The peak is theirs, not the 40 ms of the
	// commits made after its return.
	healAt := 5.0
	late := map[string][]LagSecond{"e1": {{S: 2, P99Ms: 30}, {S: 5, P99Ms: 40}, {S: 6, P99Ms: 2400}, {S: 7, P99Ms: 20}}}
	got = Measure(Span{What: "node e1 kill", AtS: 3, HealS: &healAt}, flat(0, 6, func(int) int64 { return 100 }), nil, late, nil, 0, 6, math.Inf(1))
	if got.LagPeakMs["e1"] != 2400 || got.LagBeforeMs["e1"] != 30 {
		t.Errorf("late catch-up: lag peak %v before %v, want 2400 (seen after the series end) and 30", got.LagPeakMs, got.LagBeforeMs)
	}
	// The next fault's lag is its own.
	got = Measure(Span{What: "node e1 kill", AtS: 3, HealS: &healAt}, flat(0, 6, func(int) int64 { return 100 }), nil, late, nil, 0, 6, 6)
	if got.LagPeakMs["e1"] != 40 {
		t.Errorf("lag peak %v, want 40: the lag from 6 s on belongs to the fault then", got.LagPeakMs)
	}

	// A kill that is never healed and never recovers.
	dead := flat(0, 30, func(s int) int64 {
		if s >= 15 {
			return 0
		}
		return 80
	})
	got = Measure(Span{What: "node p kill", AtS: 15}, dead, nil, nil, nil, 0, 30, math.Inf(1))
	if got.RecoverS != nil || got.HealS != nil || got.During.ToS != 16 || got.Before.TPS != 80 {
		t.Errorf("unhealed: %+v", got)
	}
	// A fault at the start has no window before: no recovery can be judged.
	got = Measure(Span{What: "x", AtS: 0}, dead, nil, nil, nil, 0, 30, math.Inf(1))
	if got.RecoverS != nil || got.Before.TPS != 0 {
		t.Errorf("fault at 0: %+v", got)
	}
}

func TestSpansAndMeasureAll(t *testing.T) {
	ev := []Event{
		{Fault: 0, What: "link a<->b down", Action: ActionApply, AtS: 10},
		{Fault: -1, What: "node e1 pause", Action: ActionApply, AtS: 12},
		{Fault: 0, What: "link a<->b down", Action: ActionHeal, AtS: 20},
		{Fault: 1, What: "node e1 kill", Action: ActionApply, AtS: 25, Err: "node e1 is not running"},
	}
	series := flat(0, 40, func(int) int64 { return 10 })
	sums := MeasureAll(ev, series, nil, nil, nil, 0, 40)
	if len(sums) != 2 {
		t.Fatalf("%d summaries, want 2 (the second shell's fault is not measured)", len(sums))
	}
	if sums[0].HealS == nil || *sums[0].HealS != 20 || sums[1].Err == "" {
		t.Errorf("%+v", sums)
	}
	if sums[1].Before.FromS != 20 {
		t.Errorf("the second fault's window before starts at %.0f s, want 20 (the first one's heal)", sums[1].Before.FromS)
	}
	// Each fault's lag peak runs until the next fault, the last one's to
	// the end of the watch (the catch-up after the run's 40 s).
	lag := map[string][]LagSecond{"e1": {{S: 12, P99Ms: 900}, {S: 24, P99Ms: 1500}, {S: 27, P99Ms: 50}, {S: 41, P99Ms: 3000}}}
	sums = MeasureAll(ev, series, nil, lag, nil, 0, 40)
	if sums[0].LagPeakMs["e1"] != 1500 || sums[1].LagPeakMs["e1"] != 3000 {
		t.Errorf("lag peaks %v and %v, want 1500 (before the second fault) and 3000 (in the catch-up)", sums[0].LagPeakMs, sums[1].LagPeakMs)
	}

	// Two faults at once (both halves of a partition): each has the same
	// window before, not an empty one.
	both := []Event{
		{Fault: 0, What: "link a<->c down", Action: ActionApply, AtS: 10},
		{Fault: 1, What: "link b<->c down", Action: ActionApply, AtS: 10},
		{Fault: 0, What: "link a<->c down", Action: ActionHeal, AtS: 20},
		{Fault: 1, What: "link b<->c down", Action: ActionHeal, AtS: 20},
	}
	sums = MeasureAll(both, series, nil, nil, nil, 0, 40)
	if len(sums) != 2 || sums[0].Before != sums[1].Before || sums[1].Before.TPS != 10 || sums[1].Before.FromS != 0 {
		t.Errorf("simultaneous faults: %+v", sums)
	}
}

func TestEventsCSV(t *testing.T) {
	ev := []Event{{Fault: 0, What: "link a<->b set loss=5%", Action: ActionApply, AtS: 1.5},
		{Fault: -1, What: `node "x", y`, Action: ActionHeal, AtS: 2, Err: "failed, badly"}}
	var b bytes.Buffer
	if err := WriteCSV(&b, ev); err != nil {
		t.Fatal(err)
	}
	got, err := ReadCSV(&b)
	if err != nil || !reflect.DeepEqual(got, ev) {
		t.Errorf("round trip: %+v, %v", got, err)
	}
	if _, err := ReadCSV(strings.NewReader("a,b\n")); err == nil {
		t.Error("not a faults.csv, accepted")
	}
}

// parseFaults reads [[fault]] tables on a lab of three sites (a, b, c,
// linked a-b, a-c, b-c) with nodes e1, e2, e3 and p1, run for 60 s.
func parseFaults(t *testing.T, faults string) []spec.Fault {
	t.Helper()
	s, err := spec.Parse("s.toml", []byte(`[lab]
name = "sched"
[site.a]
[site.b]
[site.c]
[[link]]
sites = ["a", "b"]
[[link]]
sites = ["a", "c"]
[[link]]
sites = ["b", "c"]
[engine]
kind = "postgres"
[node.p1]
site = "a"
role = "primary"
[node.e1]
site = "b"
role = "standby"
from = "p1"
[node.e2]
site = "c"
role = "standby"
from = "p1"
[node.e3]
site = "c"
role = "standby"
from = "p1"
[workload]
kind = "personnel"
[run]
duration = "60s"
cooldown = "10s"
`+faults))
	if err != nil {
		t.Fatal(err)
	}
	return s.Faults
}

// fakeClock jumps to whatever the schedule waits for: every time is the
// schedule's own.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *fakeClock) wait(ctx context.Context, t time.Time) bool {
	if ctx.Err() != nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.t) {
		c.t = t
	}
	return true
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// recorder is a World that records what it is asked and when (seconds
// since t0 on the fake clock), with link directions' parameters it can
// change and restore.
type recorder struct {
	clock *fakeClock
	mu    sync.Mutex
	calls []string
	links map[string]linkem.Params
	fail  map[string]bool // calls that fail, as recorded without the time
}

func newRecorder(dirs ...string) *recorder {
	r := &recorder{clock: &fakeClock{t: t0}, links: map[string]linkem.Params{}, fail: map[string]bool{}}
	for _, d := range dirs {
		r.links[d] = linkem.Params{Delay: time.Millisecond}
	}
	return r
}

func (r *recorder) add(call string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, fmt.Sprintf("%.3f %s", r.clock.now().Sub(t0).Seconds(), call))
	if r.fail[call] {
		return fmt.Errorf("cannot %s", call)
	}
	return nil
}

func (r *recorder) LinkParams(from, to string) (linkem.Params, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.links[from+"->"+to]
	if !ok {
		return p, fmt.Errorf("no link %s->%s", from, to)
	}
	return p, nil
}

func (r *recorder) SetLink(from, to string, both bool, kvs []string) error {
	if err := r.add(fmt.Sprintf("set %s->%s both=%v %s", from, to, both, strings.Join(kvs, " "))); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	keys := []string{from + "->" + to}
	if both {
		keys = append(keys, to+"->"+from)
	}
	for _, k := range keys {
		p := r.links[k]
		p.Down = kvs[len(kvs)-1] == "down"
		r.links[k] = p
	}
	return nil
}

func (r *recorder) RestoreLink(from, to string, p linkem.Params) error {
	if err := r.add(fmt.Sprintf("restore %s->%s down=%v", from, to, p.Down)); err != nil {
		return err
	}
	r.mu.Lock()
	r.links[from+"->"+to] = p
	r.mu.Unlock()
	return nil
}

func (r *recorder) node(do, node string) error { return r.add("node " + node + " " + do) }

func (r *recorder) Kill(ctx context.Context, n string) error    { return r.node("kill", n) }
func (r *recorder) Stop(ctx context.Context, n string) error    { return r.node("stop", n) }
func (r *recorder) Start(ctx context.Context, n string) error   { return r.node("start", n) }
func (r *recorder) Restart(ctx context.Context, n string) error { return r.node("restart", n) }
func (r *recorder) Pause(ctx context.Context, n string) error   { return r.node("pause", n) }
func (r *recorder) Resume(ctx context.Context, n string) error  { return r.node("resume", n) }
func (r *recorder) Promote(ctx context.Context, n string) error { return r.node("promote", n) }

func (r *recorder) Stage(ctx context.Context, node, stage, do string) error {
	return r.add("stage " + node + " " + stage + " " + do)
}

// run runs faults on r to the end and heals what is left, on r's clock.
func (r *recorder) run(faults []spec.Fault) (*Schedule, []Event) {
	var logged []Event
	var mu sync.Mutex
	s := NewSchedule(faults, r, func(e Event) { mu.Lock(); logged = append(logged, e); mu.Unlock() })
	s.clock = r.clock
	s.Run(context.Background(), t0)
	s.HealAll(context.Background())
	return s, logged
}

// events renders events as "AT action what [error]".
func events(ev []Event) []string {
	var out []string
	for _, e := range ev {
		line := fmt.Sprintf("%.3f %s %s", e.AtS, e.Action, e.What)
		if e.Err != "" {
			line += " error: " + e.Err
		}
		out = append(out, line)
	}
	return out
}

func same(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n%s\nwant:\n%s", what, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestScheduleAppliesHealsAndLogs: faults happen in time order, each
// healed after its for; HealAll heals what is left; every event is logged
// at the time it was due.
func TestScheduleAppliesHealsAndLogs(t *testing.T) {
	r := newRecorder("a->b", "b->a")
	r.fail["node e2 pause"] = true
	faults := parseFaults(t, `
[[fault]]
at = "40ms"
for = "60ms"
link = "a<->b"
set = "down"
[[fault]]
at = "20ms"
node = "e1"
do = "kill"
[[fault]]
at = "60ms"
for = "10ms"
node = "e2"
do = "pause"
[[fault]]
at = "70ms"
for = "10ms"
node = "e3"
do = "stop"
[[fault]]
at = "82ms"
for = "5ms"
node = "e3"
stage = "replicat"
do = "kill"
`)
	s, logged := r.run(faults)
	same(t, "calls", r.calls, []string{
		"0.020 node e1 kill",
		"0.040 set a->b both=true down",
		"0.060 node e2 pause", // fails: nothing to heal
		"0.070 node e3 stop",
		"0.080 node e3 start",
		"0.082 stage e3 replicat kill", // a stage, not the server
		"0.087 stage e3 replicat start",
		"0.100 restore a->b down=false", "0.100 restore b->a down=false",
		"0.100 node e1 start", // HealAll: the kill without for
	})
	ev := s.Events()
	same(t, "events", events(ev), []string{
		"0.020 apply node e1 kill",
		"0.040 apply link a<->b set down",
		"0.060 apply node e2 pause error: cannot node e2 pause",
		"0.070 apply node e3 stop",
		"0.080 heal node e3 stop",
		"0.082 apply node e3 replicat kill",
		"0.087 heal node e3 replicat kill",
		"0.100 heal link a<->b set down",
		"0.100 heal node e1 kill (at the end of the run)",
	})
	same(t, "logged", events(logged), events(ev))
	for _, e := range ev {
		if f := faults[e.Fault]; e.Action == ActionApply && e.AtS != f.At.Seconds() {
			t.Errorf("%s applied at %.3f s, due at %v", e.What, e.AtS, f.At)
		}
	}
}

// TestScheduleFlap: a flapping link goes down at at and every every after,
// up down later each time, and is put back at at + for; a step that fails
// is said with the heal.
func TestScheduleFlap(t *testing.T) {
	r := newRecorder("a->b", "b->a")
	faults := parseFaults(t, `
[[fault]]
at = "1s"
for = "5s"
link = "a<->b"
do = "flap"
every = "2s"
down = "500ms"
[[fault]]
at = "3s"
node = "e1"
do = "restart"
`)
	s, _ := r.run(faults)
	same(t, "calls", r.calls, []string{
		"1.000 set a->b both=true down",
		"1.500 set a->b both=true up",
		"3.000 set a->b both=true down", // a step of a fault in effect before a new fault at the same time
		"3.000 node e1 restart",
		"3.500 set a->b both=true up",
		"5.000 set a->b both=true down",
		"5.500 set a->b both=true up",
		"6.000 restore a->b down=false", "6.000 restore b->a down=false",
	})
	same(t, "events", events(s.Events()), []string{
		"1.000 apply link a<->b flap every 2s down 500ms",
		"3.000 apply node e1 restart",
		"6.000 heal link a<->b flap every 2s down 500ms",
	})

	// One way, cut short by its for (down at 4 s, healed at 4.2 s), and a
	// step that fails.
	r = newRecorder("a->b", "b->a")
	r.fail["set a->b both=false up"] = true
	s, _ = r.run(parseFaults(t, `
[[fault]]
at = "0s"
for = "4200ms"
link = "a->b"
do = "flap"
every = "2s"
down = "1s"
`))
	same(t, "calls", r.calls, []string{
		"0.000 set a->b both=false down",
		"1.000 set a->b both=false up", // fails
		"2.000 set a->b both=false down",
		"3.000 set a->b both=false up", // fails
		"4.000 set a->b both=false down",
		"4.200 restore a->b down=false",
	})
	same(t, "events", events(s.Events()), []string{
		"0.000 apply link a->b flap every 2s down 1s",
		"4.200 heal link a->b flap every 2s down 1s error: step at 1.000 s: cannot set a->b both=false up; step at 3.000 s: cannot set a->b both=false up",
	})
}

// TestScheduleIsolate: every link of the site goes down, both directions,
// and each direction is put back as it was; one that cannot go down puts
// the others back at once.
func TestScheduleIsolate(t *testing.T) {
	dirs := []string{"a->b", "b->a", "a->c", "c->a", "b->c", "c->b"}
	r := newRecorder(dirs...)
	r.links["c->a"] = linkem.Params{Down: true} // down before: down after
	s, _ := r.run(parseFaults(t, `
[[fault]]
at = "2s"
for = "3s"
site = "a"
do = "isolate"
[[fault]]
at = "10s"
site = "c"
do = "isolate"
`))
	same(t, "calls", r.calls, []string{
		"2.000 set a->b both=true down",
		"2.000 set a->c both=true down",
		"5.000 restore a->b down=false", "5.000 restore b->a down=false", "5.000 restore a->c down=false", "5.000 restore c->a down=true",
		"10.000 set c->a both=true down",
		"10.000 set c->b both=true down",
		"10.000 restore c->a down=true", "10.000 restore a->c down=false", "10.000 restore c->b down=false", "10.000 restore b->c down=false",
	})
	same(t, "events", events(s.Events()), []string{
		"2.000 apply site a isolate",
		"5.000 heal site a isolate",
		"10.000 apply site c isolate",
		"10.000 heal site c isolate (at the end of the run)",
	})

	r = newRecorder(dirs...)
	r.fail["set a->c both=true down"] = true
	s, _ = r.run(parseFaults(t, `
[[fault]]
at = "1s"
for = "1s"
site = "a"
do = "isolate"
`))
	same(t, "calls", r.calls, []string{
		"1.000 set a->b both=true down",
		"1.000 set a->c both=true down", // fails: what went down comes back
		"1.000 restore a->b down=false", "1.000 restore b->a down=false", "1.000 restore a->c down=false", "1.000 restore c->a down=false",
	})
	same(t, "events", events(s.Events()), []string{"1.000 apply site a isolate error: cannot set a->c both=true down"})
}

// A cancelled schedule stops applying faults.
func TestScheduleStopsWithItsContext(t *testing.T) {
	r := newRecorder()
	s := NewSchedule(parseFaults(t, "[[fault]]\nat = \"50s\"\nnode = \"e1\"\ndo = \"kill\"\n"), r, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx, time.Now()); close(done) }()
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	if len(r.calls) != 0 {
		t.Errorf("calls after cancel: %v", r.calls)
	}
}

// A heal the world refuses on purpose (a primary failed over from) is
// logged, not recorded: the fault stays unhealed in the events.
func TestHealThatStaysDown(t *testing.T) {
	r := newRecorder()
	var logged []string
	s := NewSchedule(parseFaults(t, "[[fault]]\nat = \"0s\"\nnode = \"p1\"\ndo = \"kill\"\n"), stayDown{r}, func(e Event) { logged = append(logged, e.What) })
	s.clock = r.clock
	s.Run(context.Background(), t0)
	s.HealAll(context.Background())
	ev := s.Events()
	if len(ev) != 1 || ev[0].Action != ActionApply {
		t.Errorf("events %+v, want the kill alone", ev)
	}
	if len(logged) != 2 || !strings.Contains(logged[1], "not healed: stays down") {
		t.Errorf("logged %q", logged)
	}
}

// stayDown refuses every start with ErrStaysDown.
type stayDown struct{ *recorder }

func (s stayDown) Start(ctx context.Context, node string) error {
	return fmt.Errorf("%w: failed over from", faultkind.ErrStaysDown)
}
