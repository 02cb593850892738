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

	"replab/internal/linkem"
	"replab/internal/spec"
)

// Target is what a schedule acts on: the lab's link directions and the
// cluster's nodes.
type Target interface {
	// LinkParams reads a direction's parameters (to heal it later).
	LinkParams(from, to string) (linkem.Params, error)
	// SetLink applies link set's key=value changes (or down/up).
	SetLink(from, to string, both bool, kvs []string) error
	// RestoreLink puts a direction's parameters back.
	RestoreLink(from, to string, p linkem.Params) error
	// Node does one of spec.FaultDos to a node.
	Node(ctx context.Context, node, do string) error
	// Stage does one of spec.FaultDos (not promote) to a node's
	// replication stage (spec.Fault.Stage).
	Stage(ctx context.Context, node, stage, do string) error
}

// Describe is a fault in a few words, as the log and the report say it.
func Describe(f spec.Fault) string {
	if f.Node != "" && f.Stage != "" {
		return "node " + f.Node + " " + f.Stage + " " + f.Do
	}
	if f.Node != "" {
		return "node " + f.Node + " " + f.Do
	}
	return "link " + f.Link + " " + strings.Join(f.Set, " ")
}

// ActionTimeout bounds one fault's or heal's action (a node's start).
const ActionTimeout = 3 * time.Minute

// Schedule runs a spec's faults against a target.
type Schedule struct {
	faults []spec.Fault
	target Target
	log    func(Event) // called as each event happens; may be nil

	mu     sync.Mutex
	events []Event
	start  time.Time
	open   map[int]func(context.Context) error // heals of faults in effect
}

// NewSchedule prepares faults; log sees every event as it happens.
func NewSchedule(faults []spec.Fault, target Target, log func(Event)) *Schedule {
	return &Schedule{faults: faults, target: target, log: log, open: map[int]func(context.Context) error{}}
}

// Run applies each fault At after start (the measure phase's beginning)
// and heals it For later, until every fault is done or ctx ends. Faults
// are applied in time order; ones due at the same moment in spec order.
func (s *Schedule) Run(ctx context.Context, start time.Time) {
	s.mu.Lock()
	s.start = start
	s.mu.Unlock()
	type step struct {
		at   time.Duration
		i    int
		heal bool
	}
	var steps []step
	for i, f := range s.faults {
		steps = append(steps, step{f.At, i, false})
		if f.For > 0 {
			steps = append(steps, step{f.At + f.For, i, true})
		}
	}
	slices.SortStableFunc(steps, func(a, b step) int {
		if a.at != b.at {
			return cmp.Compare(a.at, b.at)
		}
		if a.heal != b.heal { // a heal due with another fault's start goes first
			if a.heal {
				return -1
			}
			return 1
		}
		return a.i - b.i
	})
	for _, st := range steps {
		t := time.NewTimer(time.Until(start.Add(st.at)))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		// Once begun, a fault or its heal runs to its end (a node's start
		// may outlast the schedule): a heal cut short would leave the node
		// down for the catch-up and the checks after the run.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ActionTimeout)
		if st.heal {
			s.heal(actx, st.i, "")
		} else {
			s.apply(actx, st.i)
		}
		cancel()
	}
}

// apply breaks fault i and remembers how to heal it.
func (s *Schedule) apply(ctx context.Context, i int) {
	f := s.faults[i]
	var err error
	var heal func(context.Context) error
	if f.Node != "" {
		do := func(ctx context.Context, what string) error {
			if f.Stage != "" {
				return s.target.Stage(ctx, f.Node, f.Stage, what)
			}
			return s.target.Node(ctx, f.Node, what)
		}
		err = do(ctx, f.Do)
		if h := spec.FaultHeal(f.Do); h != "" && err == nil {
			heal = func(ctx context.Context) error { return do(ctx, h) }
		}
	} else {
		heal, err = s.applyLink(f)
	}
	if heal != nil {
		s.mu.Lock()
		s.open[i] = heal
		s.mu.Unlock()
	}
	s.record(Event{Fault: i, What: Describe(f), Action: ActionApply}, err)
}

// applyLink changes a link's directions and returns what puts them back.
func (s *Schedule) applyLink(f spec.Fault) (func(context.Context) error, error) {
	dirs := [][2]string{{f.From, f.To}}
	if f.Both {
		dirs = append(dirs, [2]string{f.To, f.From})
	}
	saved := make([]linkem.Params, len(dirs))
	for k, d := range dirs {
		p, err := s.target.LinkParams(d[0], d[1])
		if err != nil {
			return nil, err
		}
		saved[k] = p
	}
	if err := s.target.SetLink(f.From, f.To, f.Both, f.Set); err != nil {
		return nil, err
	}
	return func(context.Context) error {
		var errs []string
		for k, d := range dirs {
			if err := s.target.RestoreLink(d[0], d[1], saved[k]); err != nil {
				errs = append(errs, err.Error())
			}
		}
		if len(errs) > 0 {
			return fmt.Errorf("restore %s: %s", f.Link, strings.Join(errs, "; "))
		}
		return nil
	}, nil
}

// heal undoes fault i if it is in effect; note goes into the event.
func (s *Schedule) heal(ctx context.Context, i int, note string) {
	s.mu.Lock()
	h := s.open[i]
	delete(s.open, i)
	s.mu.Unlock()
	if h == nil {
		return
	}
	err := h(ctx)
	what := Describe(s.faults[i])
	if errors.Is(err, ErrStaysDown) {
		// Refused on purpose: said in the log, and the fault stays
		// unhealed in the events.
		if note != "" {
			note += "; "
		}
		if s.log != nil {
			s.log(Event{Fault: i, What: what + " (" + note + "not healed: " + err.Error() + ")", Action: ActionHeal, AtS: time.Since(s.start).Seconds()})
		}
		return
	}
	if note != "" {
		what += " (" + note + ")"
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
	e.AtS = time.Since(s.start).Seconds()
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
