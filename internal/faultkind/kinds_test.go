package faultkind

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"replab/internal/linkem"
)

// table is a fault as written, for a kind's Parse: its keys, its for, and
// the problems reported ("key = value: msg", "key: msg").
type table struct {
	keys map[string]any
	dur  time.Duration
	errs []string
}

func (r *table) Has(key string) bool {
	if key == "for" {
		return r.dur != 0
	}
	_, ok := r.keys[key]
	return ok
}

func (r *table) Value(key string) any { return r.keys[key] }

func (r *table) String(key, want string) (string, bool) {
	v, ok := r.keys[key]
	if !ok {
		return "", false
	}
	s, ok := v.(string)
	if !ok {
		r.Fail(key, "want %s", want)
	}
	return s, ok
}

func (r *table) Duration(key, want string) (time.Duration, bool) {
	s, ok := r.String(key, want)
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		r.Fail(key, "not a duration")
		return 0, false
	}
	return d, true
}

func (r *table) For() (time.Duration, bool) { return r.dur, r.dur > 0 }

func (r *table) Fail(key, format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf("%s = %v: %s", key, r.keys[key], fmt.Sprintf(format, args...)))
}

func (r *table) FailAt(key, format string, args ...any) {
	r.errs = append(r.errs, key+": "+fmt.Sprintf(format, args...))
}

// lab is a spec (and a world) of sites a, b, c with links a-b and a-c;
// a->b has a rate, b->a none. Its changes: down, up, rate=N, preset=jumbo
// (mtu 9000), queue=1bdp (needs a rate).
type lab struct {
	links  [][2]string
	params map[[2]string]linkem.Params
	calls  []string
	fail   map[string]bool
}

func newLab() *lab {
	return &lab{
		links: [][2]string{{"a", "b"}, {"c", "a"}},
		params: map[[2]string]linkem.Params{
			{"a", "b"}: {RateBps: 1e6, MTU: 1500}, {"b", "a"}: {MTU: 1500},
			{"c", "a"}: {MTU: 1500}, {"a", "c"}: {MTU: 1500},
		},
		fail: map[string]bool{},
	}
}

func (l *lab) Links() [][2]string { return l.links }

func (l *lab) Direction(from, to string) (linkem.Params, bool) {
	p, ok := l.params[[2]string{from, to}]
	return p, ok
}

func (l *lab) Change(p *linkem.Params, change string) error {
	k, v, _ := strings.Cut(change, "=")
	switch k {
	case "down", "up":
		p.Down = k == "down"
	case "rate":
		_, err := fmt.Sscan(v, &p.RateBps)
		return err
	case "preset":
		p.MTU = 9000
	case "queue":
		if p.RateBps == 0 {
			return errors.New("queue = 1bdp: needs a rate")
		}
	default:
		return fmt.Errorf("%s: unknown key", k)
	}
	return nil
}

func (l *lab) call(s string) error {
	l.calls = append(l.calls, s)
	if l.fail[s] {
		return errors.New("cannot " + s)
	}
	return nil
}

func (l *lab) LinkParams(from, to string) (linkem.Params, error) {
	p, ok := l.params[[2]string{from, to}]
	if !ok {
		return p, fmt.Errorf("no link %s->%s", from, to)
	}
	return p, nil
}

func (l *lab) SetLink(from, to string, both bool, changes []string) error {
	if err := l.call(fmt.Sprintf("set %s->%s both=%v %s", from, to, both, strings.Join(changes, " "))); err != nil {
		return err
	}
	dirs := [][2]string{{from, to}}
	if both {
		dirs = append(dirs, [2]string{to, from})
	}
	for _, d := range dirs {
		p := l.params[d]
		for _, c := range changes {
			if err := l.Change(&p, c); err != nil {
				return err
			}
		}
		l.params[d] = p
	}
	return nil
}

func (l *lab) RestoreLink(from, to string, p linkem.Params) error {
	if err := l.call(fmt.Sprintf("restore %s->%s down=%v", from, to, p.Down)); err != nil {
		return err
	}
	l.params[[2]string{from, to}] = p
	return nil
}

func (l *lab) Kill(_ context.Context, n string) error    { return l.call("kill " + n) }
func (l *lab) Stop(_ context.Context, n string) error    { return l.call("stop " + n) }
func (l *lab) Start(_ context.Context, n string) error   { return l.call("start " + n) }
func (l *lab) Restart(_ context.Context, n string) error { return l.call("restart " + n) }
func (l *lab) Pause(_ context.Context, n string) error   { return l.call("pause " + n) }
func (l *lab) Resume(_ context.Context, n string) error  { return l.call("resume " + n) }
func (l *lab) Promote(_ context.Context, n string) error { return l.call("promote " + n) }
func (l *lab) Stage(_ context.Context, n, stage, action string) error {
	return l.call(action + " " + n + "/" + stage)
}

var (
	ab  = Subject{On: OnLink, From: "a", To: "b", Both: true}
	abo = Subject{On: OnLink, From: "a", To: "b"}
)

// parse reads keys (and for) as kind name would, on sub, against s.
func parse(t *testing.T, name string, sub Subject, s Spec, keys map[string]any, dur time.Duration) (Fault, []string) {
	t.Helper()
	k := Default().Lookup(name)
	if k == nil {
		t.Fatalf("no kind %s", name)
	}
	r := &table{keys: keys, dur: dur}
	f := k.Parse(r, sub, s)
	if (f == nil) != (len(r.errs) > 0) {
		t.Errorf("%s %v: fault %v with errors %q", name, keys, f, r.errs)
	}
	return f, r.errs
}

func TestSetParses(t *testing.T) {
	for _, tc := range []struct {
		name string
		sub  Subject
		spec bool
		set  any
		want []string // errors; none: Changes = wantSet
		got  []string
	}{
		{"a string of changes", ab, true, "down rate=5", nil, []string{"down", "rate=5"}},
		{"a list", abo, true, []any{" queue=1bdp ", "up"}, nil, []string{"queue=1bdp", "up"}},
		{"a word that continues the change before", ab, false, "loss=gemodel 1% 10% up", nil, []string{"loss=gemodel 1% 10%", "up"}},
		{"not a string", ab, true, 3, []string{`set = 3: want what changes on the link: "down", "up", or key=value pairs like "loss=5%" or "delay=400ms loss=1%", or a list like ["delay=400ms", "loss=1%"]`}, nil},
		{"a list of numbers", ab, true, []any{"down", int64(1)}, []string{`set = [down 1]: want what changes`}, nil},
		{"empty", ab, true, " ", []string{`set =  : empty; want what changes`}, nil},
		{"the mtu", ab, true, "mtu=9000", []string{"set = mtu=9000: mtu = 9000: the mtu cannot change during a run (it is fixed when the lab is built); set mtu in the [[link]] instead"}, nil},
		{"a change that changes the mtu", ab, true, "preset=jumbo", []string{"set = preset=jumbo: preset = jumbo: changes the mtu from 1500 to 9000 bytes; the mtu cannot change during a run (it is fixed when the lab is built)"}, nil},
		{"a change one direction refuses", ab, true, "queue=1bdp", []string{"set = queue=1bdp: queue = 1bdp: needs a rate (direction b->a)"}, nil},
		{"a change both refuse, said once", ab, true, "sideways", []string{"set = sideways: sideways: unknown key"}, nil},
		{"the one direction that takes it", abo, true, "queue=1bdp", nil, []string{"queue=1bdp"}},
		{"a change after one that makes it right", ab, true, "rate=9 queue=1bdp", nil, []string{"rate=9", "queue=1bdp"}},
		{"without a spec only the mtu is checked", ab, false, "sideways mtu=1", []string{"set = sideways mtu=1: mtu = 1: the mtu cannot change"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s Spec
			if tc.spec {
				s = newLab()
			}
			f, errs := parse(t, SetName, tc.sub, s, map[string]any{"set": tc.set}, 0)
			if len(errs) != len(tc.want) {
				t.Fatalf("errors %q, want %q", errs, tc.want)
			}
			for i := range errs {
				if !strings.HasPrefix(errs[i], tc.want[i]) {
					t.Errorf("error %q, want %q", errs[i], tc.want[i])
				}
			}
			if tc.got != nil && !reflect.DeepEqual(f.(*Set).Changes, tc.got) {
				t.Errorf("changes %q, want %q", f.(*Set).Changes, tc.got)
			}
		})
	}
	if _, errs := parse(t, SetName, ab, newLab(), nil, 0); len(errs) != 1 || !strings.HasPrefix(errs[0], "link: a link fault needs set") {
		t.Errorf("no set: %q", errs)
	}
}

func TestSetAppliesAndHeals(t *testing.T) {
	l := newLab()
	before := l.params[[2]string{"a", "b"}]
	f, _ := parse(t, SetName, ab, l, map[string]any{"set": "down rate=5"}, 0)
	if got := f.Describe(); got != "link a<->b set down rate=5" {
		t.Errorf("Describe: %q", got)
	}
	if got := f.Parts(); !reflect.DeepEqual(got, []Part{{Dir: [2]string{"a", "b"}}, {Dir: [2]string{"b", "a"}}}) || got[1].String() != "b->a" || got[1].Class() != "link direction" {
		t.Errorf("Parts: %v", got)
	}
	heal, err := f.Apply(context.Background(), l)
	if err != nil || heal == nil {
		t.Fatal(heal, err)
	}
	if p := l.params[[2]string{"a", "b"}]; !p.Down || p.RateBps != 5 {
		t.Errorf("a->b during: %+v", p)
	}
	if err := heal(context.Background()); err != nil || l.params[[2]string{"a", "b"}] != before {
		t.Errorf("heal: %v; a->b %+v, want %+v", err, l.params[[2]string{"a", "b"}], before)
	}
	want := []string{"set a->b both=true down rate=5", "restore a->b down=false", "restore b->a down=false"}
	if !reflect.DeepEqual(l.calls, want) {
		t.Errorf("calls %q, want %q", l.calls, want)
	}
}

func TestNodeKinds(t *testing.T) {
	e1 := Subject{On: OnNode, Node: "e1"}
	replicat := Subject{On: OnNode, Node: "t1", Stage: "replicat"}
	if _, errs := parse(t, "promote", replicat, nil, map[string]any{"do": "promote"}, 0); len(errs) != 1 ||
		errs[0] != "do = promote: a stage is a process, not a server: it can be killed, stopped, started, restarted, paused or resumed, not promoted" {
		t.Errorf("a stage promoted: %q", errs)
	}
	l := newLab()
	for _, tc := range []struct {
		do    string
		sub   Subject
		what  string
		calls []string // the apply's, then the heal's
	}{
		{"kill", e1, "node e1 kill", []string{"kill e1", "start e1"}},
		{"stop", e1, "node e1 stop", []string{"stop e1", "start e1"}},
		{"pause", e1, "node e1 pause", []string{"pause e1", "resume e1"}},
		{"restart", e1, "node e1 restart", []string{"restart e1"}},
		{"start", e1, "node e1 start", []string{"start e1"}},
		{"resume", e1, "node e1 resume", []string{"resume e1"}},
		{"promote", e1, "node e1 promote", []string{"promote e1"}},
		{"kill", replicat, "node t1 replicat kill", []string{"kill t1/replicat", "start t1/replicat"}},
		{"restart", replicat, "node t1 replicat restart", []string{"restart t1/replicat"}},
	} {
		l.calls = nil
		f, _ := parse(t, tc.do, tc.sub, nil, map[string]any{"do": tc.do}, 0)
		if f.Describe() != tc.what || !reflect.DeepEqual(f.Parts(), []Part{{Node: tc.sub.Node, Stage: tc.sub.Stage}}) {
			t.Errorf("%s: %q, parts %v", tc.what, f.Describe(), f.Parts())
		}
		heal, err := f.Apply(context.Background(), l)
		if err != nil || (heal == nil) != (len(tc.calls) == 1) {
			t.Errorf("%s: heal %v, %v", tc.what, heal != nil, err)
		}
		if heal != nil {
			if err := heal(context.Background()); err != nil {
				t.Error(err)
			}
		}
		if !reflect.DeepEqual(l.calls, tc.calls) {
			t.Errorf("%s: calls %q, want %q", tc.what, l.calls, tc.calls)
		}
	}
	l.calls, l.fail["kill e1"] = nil, true
	f, _ := parse(t, "kill", e1, nil, nil, 0)
	if heal, err := f.Apply(context.Background(), l); err == nil || heal != nil {
		t.Errorf("a kill that fails: heal %v, %v", heal != nil, err)
	}
	if p := (Part{Node: "t1", Stage: "pump"}); p.String() != "the pump of node t1" || p.Class() != "node" {
		t.Errorf("%v is a %s", p, p.Class())
	}
}

func TestIsolate(t *testing.T) {
	l := newLab()
	a := Subject{On: OnSite, Site: "a"}
	f, _ := parse(t, "isolate", a, l, nil, 0)
	if got := f.(*Isolate).Others; !reflect.DeepEqual(got, []string{"b", "c"}) {
		t.Errorf("a's links go to %v, want b and c", got)
	}
	wantParts := []Part{{Dir: [2]string{"a", "b"}}, {Dir: [2]string{"b", "a"}}, {Dir: [2]string{"a", "c"}}, {Dir: [2]string{"c", "a"}}}
	if f.Describe() != "site a isolate" || !reflect.DeepEqual(f.Parts(), wantParts) {
		t.Errorf("%q holds %v", f.Describe(), f.Parts())
	}
	heal, err := f.Apply(context.Background(), l)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range [][2]string{{"a", "b"}, {"b", "a"}, {"a", "c"}, {"c", "a"}} {
		if !l.params[d].Down {
			t.Errorf("%s->%s is up while a is isolated", d[0], d[1])
		}
	}
	if err := heal(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []string{"set a->b both=true down", "set a->c both=true down",
		"restore a->b down=false", "restore b->a down=false", "restore a->c down=false", "restore c->a down=false"}
	if !reflect.DeepEqual(l.calls, want) {
		t.Errorf("calls %q, want %q", l.calls, want)
	}

	lone := newLab()
	lone.links = nil
	if _, errs := parse(t, "isolate", Subject{On: OnSite, Site: "d"}, lone, map[string]any{"site": "d"}, 0); len(errs) != 1 ||
		errs[0] != "site = d: site d has no [[link]]: there is nothing to cut it off from" {
		t.Errorf("a site without links: %q", errs)
	}
	// On a command line the lab finds the links: without them there is
	// nothing to apply.
	f, _ = parse(t, "isolate", a, nil, nil, 0)
	if _, err := f.Apply(context.Background(), l); err == nil {
		t.Error("an isolate read without a spec was applied")
	}
}

func TestFlapParses(t *testing.T) {
	ok := map[string]any{"every": "2s", "down": "500ms"}
	f, _ := parse(t, "flap", ab, nil, ok, 5*time.Second)
	if got := f.(*Flap); got.Every != 2*time.Second || got.Down != 500*time.Millisecond || got.For != 5*time.Second ||
		got.Describe() != "link a<->b flap every 2s down 500ms" || len(got.Parts()) != 2 {
		t.Errorf("%+v: %q, %v", got, got.Describe(), got.Parts())
	}
	for _, tc := range []struct {
		name string
		keys map[string]any
		dur  time.Duration
		want []string
	}{
		{"nothing", nil, 0, []string{`do: a flap needs every: how often the link goes down, e.g. every = "2s"`,
			`do: a flap needs down: how long the link stays down each time, e.g. down = "500ms"`, `do: a flap needs for: how long the link flaps, e.g. for = "20s"`}},
		{"no for", ok, 0, []string{`do: a flap needs for`}},
		{"not durations", map[string]any{"every": int64(2), "down": "1x"}, time.Minute, []string{`every = 2: want a string with a unit, like "2s"`, "down = 1x: not a duration"}},
		{"zero", map[string]any{"every": "0s", "down": "0s"}, time.Minute, []string{"every = 0s: want a duration above 0", "down = 0s: want a duration above 0"}},
		{"down as long as every", map[string]any{"every": "1s", "down": "1s"}, time.Minute, []string{"down = 1s: not below every = 1s: the link would not come up between two downs"}},
		{"every as long as for", map[string]any{"every": "1m", "down": "1s"}, time.Minute, []string{`every = 1m: not below for = 1m0s: the link would go down once; for one outage use set = "down" with for`}},
		{"too many flaps", map[string]any{"every": "10ms", "down": "1ms"}, 200 * time.Second, []string{"every = 10ms: the link would go down 20000 times in for = 3m20s; at most 10000"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errs := parse(t, "flap", ab, nil, tc.keys, tc.dur)
			if len(errs) != len(tc.want) {
				t.Fatalf("errors %q, want %q", errs, tc.want)
			}
			for i := range errs {
				if !strings.HasPrefix(errs[i], tc.want[i]) {
					t.Errorf("error %q, want %q", errs[i], tc.want[i])
				}
			}
		})
	}
}

// TestFlapSteps: down at every k·every, up down later, each before for;
// the heal at for puts back what was there (down included).
func TestFlapSteps(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		every, down, dur time.Duration
		steps            []time.Duration
	}{
		{2000 * ms, 500 * ms, 5000 * ms, []time.Duration{500 * ms, 2000 * ms, 2500 * ms, 4000 * ms, 4500 * ms}},
		{2000 * ms, 1000 * ms, 4200 * ms, []time.Duration{1000 * ms, 2000 * ms, 3000 * ms, 4000 * ms}}, // down at 4 s: the heal brings it up
		{2000 * ms, 1000 * ms, 4000 * ms, []time.Duration{1000 * ms, 2000 * ms, 3000 * ms}},
		{3 * ms, 2 * ms, 4 * ms, []time.Duration{2 * ms, 3 * ms}},
	} {
		f := &Flap{Subject: abo, Every: tc.every, Down: tc.down, For: tc.dur}
		if got := f.Steps(); !reflect.DeepEqual(got, tc.steps) {
			t.Errorf("every %v down %v for %v: steps %v, want %v", tc.every, tc.down, tc.dur, got, tc.steps)
		}
	}
	l := newLab()
	l.params[[2]string{"a", "b"}] = linkem.Params{MTU: 1500, Down: true, RateBps: 7}
	f := &Flap{Subject: abo, Every: 2 * time.Second, Down: time.Second, For: 3 * time.Second}
	heal, err := f.Apply(context.Background(), l)
	if err != nil {
		t.Fatal(err)
	}
	for i := range f.Steps() {
		if err := f.Step(context.Background(), l, i); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Step(context.Background(), l, 2); err == nil {
		t.Error("a step past the last: want an error")
	}
	if err := heal(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []string{"set a->b both=false down", "set a->b both=false up", "set a->b both=false down", "restore a->b down=true"}
	if !reflect.DeepEqual(l.calls, want) || l.params[[2]string{"a", "b"}] != (linkem.Params{MTU: 1500, Down: true, RateBps: 7}) {
		t.Errorf("calls %q (want %q), a->b after %+v", l.calls, want, l.params[[2]string{"a", "b"}])
	}
	var _ Stepper = f
}

func TestOrders(t *testing.T) {
	kinds := Default()
	k, f, err := Order{Kind: "flap", Subject: ab, Keys: map[string]any{"every": "2s", "down": "500ms"}, For: time.Minute}.Parse(kinds, nil)
	if err != nil || k.Name != "flap" || f.Describe() != "link a<->b flap every 2s down 500ms" {
		t.Errorf("flap: %v %v %v", k, f, err)
	}
	for _, tc := range []struct {
		o    Order
		want string
	}{
		{Order{Kind: "explode", Subject: ab}, `unknown fault "explode"`},
		{Order{Kind: "kill", Subject: ab}, "kill acts on a node, not a link"},
		{Order{Kind: "flap", Subject: ab, Keys: map[string]any{"every": "2x", "down": "-1s"}, For: time.Minute},
			"--every 2x: not a duration; want a string with a unit, like \"2s\": how often the link goes down; --down -1s: must not be negative"},
		{Order{Kind: "flap", Subject: ab, Keys: map[string]any{"every": "2s", "down": "2s"}, For: time.Minute}, "--down 2s: not below every = 2s"},
		{Order{Kind: "flap", Subject: ab, Keys: map[string]any{"every": "2s"}}, "a flap needs down: how long the link stays down each time, e.g. down = \"500ms\"; a flap needs for"},
		{Order{Kind: SetName, Subject: ab, Keys: map[string]any{"set": []any{"mtu=1"}}}, "mtu = 1: the mtu cannot change"},
	} {
		if _, _, err := tc.o.Parse(kinds, nil); err == nil || !strings.HasPrefix(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v: %v\nwant %q, on one line", tc.o, err, tc.want)
		}
	}
	_, f, err = Order{Kind: SetName, Subject: abo, Keys: map[string]any{"set": []any{"down"}}}.Parse(kinds, newLab())
	if err != nil || f.Describe() != "link a->b set down" {
		t.Errorf("set: %v, %v", f, err)
	}
}

func TestCannot(t *testing.T) {
	err := fmt.Errorf("fault: %w", Cannot("xrootd", "promote nodes"))
	if !errors.Is(err, ErrCannot) || err.Error() != "fault: engine xrootd cannot promote nodes" {
		t.Errorf("%v", err)
	}
}

func TestSplitChanges(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"down", []string{"down"}},
		{"  up ", []string{"up"}},
		{"delay=400ms loss=1%", []string{"delay=400ms", "loss=1%"}},
		{"loss=gemodel 1% 10% 100% 0% rate=64kbit", []string{"loss=gemodel 1% 10% 100% 0%", "rate=64kbit"}},
		{"delay = 400ms down", []string{"delay = 400ms", "down"}},
		{"delay= 400ms rate =1mbit", []string{"delay= 400ms", "rate =1mbit"}},
		{"sideways 1%", []string{"sideways", "1%"}},
		{"", nil},
	} {
		if got := splitChanges(tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("splitChanges(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// primaryLab is a world whose primary moves: each Primary call names the
// node that takes writes then.
type primaryLab struct {
	*lab
	primary, site string
}

func (l *primaryLab) Primary(context.Context) (string, string, error) {
	if l.primary == "" {
		return "", "", errors.New("no node takes writes now")
	}
	return l.primary, l.site, nil
}

func TestPrimaryNodeIsResolvedAtApplyAndHealedThere(t *testing.T) {
	w := &primaryLab{lab: newLab(), primary: "p1"}
	f, _ := parse(t, "kill", Subject{On: OnNode, Node: PrimaryNode}, nil, map[string]any{"do": "kill"}, 0)
	if f.Describe() != "node @primary kill" {
		t.Errorf("describe: %q", f.Describe())
	}
	heal, err := f.Apply(context.Background(), w)
	if err != nil {
		t.Fatal(err)
	}
	w.primary = "e1" // a failover while p1 is down
	if err := heal(context.Background()); err != nil {
		t.Fatal(err)
	}
	if want := []string{"kill p1", "start p1"}; !reflect.DeepEqual(w.calls, want) {
		t.Errorf("calls %q, want %q", w.calls, want)
	}
	w.primary, w.calls = "", nil
	if _, err := f.Apply(context.Background(), w); err == nil || !strings.Contains(err.Error(), "no node takes writes") || len(w.calls) != 0 {
		t.Errorf("no primary: %v, calls %q", err, w.calls)
	}
	if _, err := f.Apply(context.Background(), newLab()); err == nil || !strings.Contains(err.Error(), "cannot tell") {
		t.Errorf("a world that cannot tell: %v", err)
	}
}

// A cut takes down only the links to the sites in from: a (linked to b
// and c) cut from b still reaches c.
func TestCut(t *testing.T) {
	l := newLab()
	a := Subject{On: OnSite, Site: "a"}
	f, errs := parse(t, "cut", a, l, map[string]any{"from": []any{"b"}}, 0)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if f.Describe() != "site a cut from b" || !reflect.DeepEqual(f.Parts(), []Part{{Dir: [2]string{"a", "b"}}, {Dir: [2]string{"b", "a"}}}) {
		t.Errorf("%q holds %v", f.Describe(), f.Parts())
	}
	heal, err := f.Apply(context.Background(), l)
	if err != nil {
		t.Fatal(err)
	}
	if !l.params[[2]string{"a", "b"}].Down || !l.params[[2]string{"b", "a"}].Down || l.params[[2]string{"a", "c"}].Down || l.params[[2]string{"c", "a"}].Down {
		t.Errorf("a cut from b: %+v", l.params)
	}
	if err := heal(context.Background()); err != nil {
		t.Fatal(err)
	}
	if want := []string{"set a->b both=true down", "restore a->b down=false", "restore b->a down=false"}; !reflect.DeepEqual(l.calls, want) {
		t.Errorf("calls %q, want %q", l.calls, want)
	}
	// From a command line: a comma-separated list.
	if f, errs := parse(t, "cut", a, nil, map[string]any{"from": "b, c"}, 0); len(errs) > 0 || !reflect.DeepEqual(f.(*Cut).From, []string{"b", "c"}) {
		t.Errorf("--from b,c: %v %v", f, errs)
	}
	for _, tc := range []struct {
		from any
		want string
	}{
		{nil, `from: cut needs from: the sites a is cut off from, like ["eu", "asia"] (all of them: use do = "isolate")`},
		{[]any{"d"}, "from = [d]: no [[link]] joins a and d; a is linked to b, c"},
		{[]any{"a"}, "from = [a]: site a cannot be cut off from itself"},
		{[]any{"b", "b"}, "from = [b b]: site b is named twice"},
		{[]any{1}, `from = [1]: want a list of site names, like ["eu", "asia"]`},
	} {
		keys := map[string]any{}
		if tc.from != nil {
			keys["from"] = tc.from
		}
		if _, errs := parse(t, "cut", a, l, keys, 0); len(errs) != 1 || errs[0] != tc.want {
			t.Errorf("from %v: %q, want %q", tc.from, errs, tc.want)
		}
	}
}

// The primary's site, cut off or isolated: found when the fault is
// applied, its heal puts back what it took down.
func TestPrimarySite(t *testing.T) {
	l := &primaryLab{lab: newLab(), primary: "n1", site: "b"}
	sub := Subject{On: OnSite, Site: PrimaryNode}
	// b is linked to a only; from names every site, b's own left out.
	f, errs := parse(t, "cut", sub, l, map[string]any{"from": []any{"a", "b", "c"}}, 0)
	if len(errs) > 0 || f.Parts() != nil {
		t.Fatalf("%v parts %v", errs, f.Parts())
	}
	heal, err := f.Apply(context.Background(), l)
	if err != nil {
		t.Fatal(err)
	}
	if err := heal(context.Background()); err != nil {
		t.Fatal(err)
	}
	if want := []string{"set b->a both=true down", "restore b->a down=false", "restore a->b down=false"}; !reflect.DeepEqual(l.calls, want) {
		t.Errorf("cut: calls %q, want %q", l.calls, want)
	}
	l.calls, l.site = nil, "a"
	f, _ = parse(t, "isolate", sub, l, nil, 0)
	heal, err = f.Apply(context.Background(), l)
	if err != nil {
		t.Fatal(err)
	}
	_ = heal(context.Background())
	if want := []string{"set a->b both=true down", "set a->c both=true down"}; !reflect.DeepEqual(l.calls[:2], want) {
		t.Errorf("isolate: calls %q", l.calls)
	}
	if _, err := f.Apply(context.Background(), newLab()); err == nil || !strings.Contains(err.Error(), "cannot tell") {
		t.Errorf("a world that cannot tell: %v", err)
	}
}
