package fault

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"replab/internal/faultkind"
	"replab/internal/spec"
)

// ActionTimeout bounds one fault's or heal's action (a node's start).
const ActionTimeout = 3 * time.Minute

// Schedule runs a spec's faults against a world: each fault's kind
// (internal/faultkind) applies, steps and heals it.
type Schedule struct {
	faults []spec.Fault
	world  faultkind.World
	log    func(Event) // called as each event happens; may be nil
	clock  clock

	mu     sync.Mutex
	events []Event
	start  time.Time
	open   map[int]*inEffect // faults applied and not healed
}

// inEffect is a fault applied and not yet healed.
type inEffect struct {
	heal     faultkind.Heal // nil: nothing to heal (an instantaneous fault)
	stepErrs []string       // steps that failed (a flapping link that did not go down)
}

// clock is the schedule's time; tests give one that jumps.
type clock interface {
	now() time.Time
	// wait returns at t, or false once ctx ends first.
	wait(ctx context.Context, t time.Time) bool
}

type wallClock struct{}

func (wallClock) now() time.Time { return time.Now() }

func (wallClock) wait(ctx context.Context, t time.Time) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// NewSchedule prepares faults; log sees every event as it happens.
func NewSchedule(faults []spec.Fault, world faultkind.World, log func(Event)) *Schedule {
	return &Schedule{faults: faults, world: world, log: log, clock: wallClock{}, open: map[int]*inEffect{}}
}

// step is one action of the schedule: fault i's apply, one of its steps
// (a flap's), or its heal, due at into the measure phase.
type step struct {
	at   time.Duration
	i    int
	what int // applyStep, healStep, or the fault's step number from 0
}

const (
	applyStep = -1
	healStep  = -2
)

// order is the order of steps due at the same moment: heals first, then
// the steps of faults in effect, then new faults.
func (st step) order() int {
	switch st.what {
	case healStep:
		return 0
	case applyStep:
		return 2
	}
	return 1
}

// plan is every step of the schedule in the order they are done: by time;
// at the same moment heals, then steps, then applies, each in spec order.
func (s *Schedule) plan() []step {
	var steps []step
	for i, f := range s.faults {
		steps = append(steps, step{f.At, i, applyStep})
		if st, ok := f.Act.(faultkind.Stepper); ok {
			for k, off := range st.Steps() {
				steps = append(steps, step{f.At + off, i, k})
			}
		}
		if f.For > 0 {
			steps = append(steps, step{f.At + f.For, i, healStep})
		}
	}
	slices.SortStableFunc(steps, func(a, b step) int {
		return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.order(), b.order()), cmp.Compare(a.i, b.i), cmp.Compare(a.what, b.what))
	})
	return steps
}

// Run applies each fault At after start (the measure phase's beginning),
// does its steps, and heals it For later, until every fault is done or ctx
// ends.
func (s *Schedule) Run(ctx context.Context, start time.Time) {
	s.mu.Lock()
	s.start = start
	s.mu.Unlock()
	for _, st := range s.plan() {
		if !s.clock.wait(ctx, start.Add(st.at)) {
			return
		}
		// Once begun, a fault or its heal runs to its end (a node's start
		// may outlast the schedule): a heal cut short would leave the node
		// down for the catch-up and the checks after the run.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ActionTimeout)
		switch st.what {
		case applyStep:
			s.apply(actx, st.i)
		case healStep:
			s.heal(actx, st.i, "")
		default:
			s.step(actx, st.i, st.what)
		}
		cancel()
	}
}

// apply breaks fault i and remembers how to heal it.
func (s *Schedule) apply(ctx context.Context, i int) {
	f := s.faults[i]
	heal, err := f.Act.Apply(ctx, s.world)
	if err == nil {
		s.mu.Lock()
		s.open[i] = &inEffect{heal: heal}
		s.mu.Unlock()
	}
	s.record(Event{Fault: i, What: f.Describe(), Action: ActionApply}, err)
}

// step does step k of fault i if it is in effect; a step that fails is
// said with the fault's heal.
func (s *Schedule) step(ctx context.Context, i, k int) {
	s.mu.Lock()
	e := s.open[i]
	s.mu.Unlock()
	st, ok := s.faults[i].Act.(faultkind.Stepper)
	if e == nil || !ok {
		return
	}
	if err := st.Step(ctx, s.world, k); err != nil {
		at := s.clock.now().Sub(s.start).Seconds()
		s.mu.Lock()
		e.stepErrs = append(e.stepErrs, fmt.Sprintf("step at %.3f s: %v", at, err))
		s.mu.Unlock()
	}
}

// heal undoes fault i if it is in effect; note goes into the event.
func (s *Schedule) heal(ctx context.Context, i int, note string) {
	s.mu.Lock()
	e := s.open[i]
	delete(s.open, i)
	s.mu.Unlock()
	if e == nil || e.heal == nil {
		return
	}
	err := e.heal(ctx)
	what := s.faults[i].Describe()
	if errors.Is(err, faultkind.ErrStaysDown) {
		// Refused on purpose: said in the log, and the fault stays
		// unhealed in the events.
		if note != "" {
			note += "; "
		}
		if s.log != nil {
			s.log(Event{Fault: i, What: what + " (" + note + "not healed: " + err.Error() + ")", Action: ActionHeal, AtS: s.clock.now().Sub(s.start).Seconds()})
		}
		return
	}
	if note != "" {
		what += " (" + note + ")"
	}
	if len(e.stepErrs) > 0 {
		steps := strings.Join(e.stepErrs, "; ")
		if err != nil {
			err = fmt.Errorf("%w; %s", err, steps)
		} else {
			err = errors.New(steps)
		}
	}
	s.record(Event{Fault: i, What: what, Action: ActionHeal}, err)
}

// HealAll heals every fault still in effect — a link changed without for,
// a node killed, stopped or paused — so that replicas can catch up and
// copies be compared after the run.
func (s *Schedule) HealAll(ctx context.Context) {
	s.mu.Lock()
	var open []int
	for i := range s.open {
		open = append(open, i)
	}
	s.mu.Unlock()
	slices.Sort(open)
	for _, i := range open {
		s.heal(ctx, i, "at the end of the run")
	}
}

func (s *Schedule) record(e Event, err error) {
	s.mu.Lock()
	e.AtS = s.clock.now().Sub(s.start).Seconds()
	if err != nil {
		e.Err = err.Error()
	}
	s.events = append(s.events, e)
	log := s.log
	s.mu.Unlock()
	if log != nil {
		log(e)
	}
}

// Add records an event from elsewhere (a fault made from a second shell)
// at wall-clock time at.
func (s *Schedule) Add(e Event, at time.Time) {
	s.mu.Lock()
	e.AtS = at.Sub(s.start).Seconds()
	s.events = append(s.events, e)
	s.mu.Unlock()
}

// Events returns what happened so far, in time order.
func (s *Schedule) Events() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.events)
	slices.SortStableFunc(out, func(a, b Event) int { return cmp.Compare(a.AtS, b.AtS) })
	return out
}
