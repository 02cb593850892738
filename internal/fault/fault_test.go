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
	got := Measure(Span{Fault: 0, What: "link a<->b down", AtS: 10, HealS: &heal}, series, gaps, lag, backlog, -5, 40)
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

	// A kill that is never healed and never recovers.
	dead := flat(0, 30, func(s int) int64 {
		if s >= 15 {
			return 0
		}
		return 80
	})
	got = Measure(Span{What: "node p kill", AtS: 15}, dead, nil, nil, nil, 0, 30)
	if got.RecoverS != nil || got.HealS != nil || got.During.ToS != 16 || got.Before.TPS != 80 {
		t.Errorf("unhealed: %+v", got)
	}
	// A fault at the start has no window before: no recovery can be judged.
	got = Measure(Span{What: "x", AtS: 0}, dead, nil, nil, nil, 0, 30)
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

// recorder is a Target that records what it is asked, with a link
// direction's parameters it can change and restore.
type recorder struct {
	mu    sync.Mutex
	calls []string
	links map[string]linkem.Params
	fail  string // a node action that fails
}

func (r *recorder) add(s string) { r.mu.Lock(); r.calls = append(r.calls, s); r.mu.Unlock() }

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
	r.add(fmt.Sprintf("set %s->%s both=%v %s", from, to, both, strings.Join(kvs, " ")))
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range []string{from + "->" + to, to + "->" + from}[:map[bool]int{false: 1, true: 2}[both]] {
		p := r.links[k]
		p.Down = kvs[0] == "down"
		r.links[k] = p
	}
	return nil
}

func (r *recorder) RestoreLink(from, to string, p linkem.Params) error {
	r.add(fmt.Sprintf("restore %s->%s down=%v", from, to, p.Down))
	r.mu.Lock()
	r.links[from+"->"+to] = p
	r.mu.Unlock()
	return nil
}

func (r *recorder) Node(ctx context.Context, node, do string) error {
	r.add("node " + node + " " + do)
	if do == r.fail {
		return fmt.Errorf("cannot %s", do)
	}
	return nil
}

func (r *recorder) Stage(ctx context.Context, node, stage, do string) error {
	r.add("stage " + node + " " + stage + " " + do)
	return nil
}

// TestScheduleAppliesHealsAndLogs: faults happen in time order, each
// healed after its for; HealAll heals what is left; every event is logged
// with a time no earlier than scheduled.
func TestScheduleAppliesHealsAndLogs(t *testing.T) {
	r := &recorder{links: map[string]linkem.Params{"a->b": {}, "b->a": {}}, fail: "pause"}
	ms := time.Millisecond
	faults := []spec.Fault{
		{At: 40 * ms, For: 60 * ms, Link: "a<->b", From: "a", To: "b", Both: true, Set: []string{"down"}},
		{At: 20 * ms, Node: "e1", Do: "kill"},
		{At: 60 * ms, For: 10 * ms, Node: "e2", Do: "pause"},
		{At: 70 * ms, For: 10 * ms, Node: "e3", Do: "stop"},
		{At: 82 * ms, For: 5 * ms, Node: "e3", Stage: "replicat", Do: "kill"},
	}
	var logged []Event
	var mu sync.Mutex
	s := NewSchedule(faults, r, func(e Event) { mu.Lock(); logged = append(logged, e); mu.Unlock() })
	start := time.Now()
	s.Run(context.Background(), start)
	s.HealAll(context.Background())
	want := []string{
		"node e1 kill",
		"set a->b both=true down",
		"node e2 pause", // fails: nothing to heal
		"node e3 stop",
		"node e3 start",
		"stage e3 replicat kill", // a stage, not the server
		"stage e3 replicat start",
		"restore a->b down=false", "restore b->a down=false",
		"node e1 start", // HealAll: the kill without for
	}
	if !reflect.DeepEqual(r.calls, want) {
		t.Errorf("calls:\n%s\nwant:\n%s", strings.Join(r.calls, "\n"), strings.Join(want, "\n"))
	}
	ev := s.Events()
	if len(ev) != 9 || len(logged) != 9 {
		t.Fatalf("%d events, %d logged: %+v", len(ev), len(logged), ev)
	}
	for _, e := range ev {
		f := faults[e.Fault]
		due := f.At
		if e.Action == ActionHeal && f.For > 0 {
			due += f.For
		}
		if e.AtS < due.Seconds() {
			t.Errorf("%s %s at %.3f s, before it was due (%.3f s)", e.Action, e.What, e.AtS, due.Seconds())
		}
	}
	if ev[2].What != "node e2 pause" || ev[2].Err == "" {
		t.Errorf("the failed pause: %+v", ev[2])
	}
	if ev[5].What != "node e3 replicat kill" {
		t.Errorf("the stage fault is logged as %q, want %q", ev[5].What, "node e3 replicat kill")
	}
	last := ev[len(ev)-1]
	if last.Action != ActionHeal || !strings.Contains(last.What, "at the end of the run") {
		t.Errorf("last event %+v", last)
	}
}

// A cancelled schedule stops applying faults.
func TestScheduleStopsWithItsContext(t *testing.T) {
	r := &recorder{links: map[string]linkem.Params{}}
	s := NewSchedule([]spec.Fault{{At: time.Hour, Node: "e1", Do: "kill"}}, r, nil)
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

// A heal the target refuses on purpose (a primary failed over from) is
// logged, not recorded: the fault stays unhealed in the events.
func TestHealThatStaysDown(t *testing.T) {
	r := &recorder{links: map[string]linkem.Params{}}
	var logged []string
	s := NewSchedule([]spec.Fault{{At: 0, Node: "p1", Do: "kill"}}, stayDown{r}, func(e Event) { logged = append(logged, e.What) })
	s.Run(context.Background(), time.Now())
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

func (s stayDown) Node(ctx context.Context, node, do string) error {
	if do == spec.FaultStart {
		return fmt.Errorf("%w: failed over from", ErrStaysDown)
	}
	return s.recorder.Node(ctx, node, do)
}
