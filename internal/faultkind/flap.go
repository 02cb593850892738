package faultkind

import (
	"context"
	"fmt"
	"time"
)

// flap takes a link down and up again, over and over: down for down at
// the start of every every, for as long as for.
//
//	link = "a<->b"          # or "a->b": one direction flaps
//	do = "flap"
//	every = "2s"
//	down = "500ms"
//	for = "20s"
func init() {
	Register(Kind{
		Name:  "flap",
		On:    OnLink,
		About: "the link goes down for down at the start of every every, for as long as for",
		Keys: []Key{
			{"every", `how often the link goes down, e.g. "2s"`},
			{"down", `how long it stays down each time, e.g. "500ms" (below every)`},
		},
		Heal:  "parameters before it put back",
		Parse: parseFlap,
	})
}

// maxFlaps bounds how many times a link flaps in one fault.
const maxFlaps = 10000

// Flap is a link going down and up: down at k·Every, up at k·Every+Down,
// for every k with k·Every below For; healed at For, when the directions'
// parameters from before are put back.
type Flap struct {
	Subject
	Every, Down, For time.Duration
}

func parseFlap(r Reader, sub Subject, s Spec) Fault {
	f := &Flap{Subject: sub}
	ok := true
	for _, k := range []struct {
		key, want, need string
		d               *time.Duration
	}{
		{"every", `a string with a unit, like "2s": how often the link goes down`, `a flap needs every: how often the link goes down, e.g. every = "2s"`, &f.Every},
		{"down", `a string with a unit, like "500ms": how long the link stays down each time`, `a flap needs down: how long the link stays down each time, e.g. down = "500ms"`, &f.Down},
	} {
		if !r.Has(k.key) {
			r.FailAt("do", "%s", k.need)
			ok = false
			continue
		}
		d, good := r.Duration(k.key, k.want)
		if good && d == 0 {
			r.Fail(k.key, "want a duration above 0")
			good = false
		}
		*k.d, ok = d, ok && good
	}
	var hasFor bool
	f.For, hasFor = r.For()
	if !hasFor {
		if !r.Has("for") {
			r.FailAt("do", `a flap needs for: how long the link flaps, e.g. for = "20s"`)
		}
		ok = false
	}
	if !ok {
		return nil
	}
	switch {
	case f.Down >= f.Every:
		r.Fail("down", "not below every = %v: the link would not come up between two downs", f.Every)
	case f.Every >= f.For:
		r.Fail("every", `not below for = %v: the link would go down once; for one outage use set = "down" with for`, f.For)
	case f.For/f.Every >= maxFlaps:
		r.Fail("every", "the link would go down %d times in for = %v; at most %d: raise every or shorten for", (f.For+f.Every-1)/f.Every, f.For, maxFlaps)
	default:
		return f
	}
	return nil
}

// Describe: "link a<->b flap every 2s down 500ms".
func (f *Flap) Describe() string {
	return fmt.Sprintf("link %s flap every %v down %v", f.Link(), f.Every, f.Down)
}

// Parts are the directions that flap.
func (f *Flap) Parts() []Part { return dirParts(f.Directions()) }

// step is one change of the flap after it began: at offset, up or down.
type step struct {
	at time.Duration
	up bool
}

// plan is every step after the first down (which is Apply), in order.
func (f *Flap) plan() []step {
	var out []step
	for t := time.Duration(0); t < f.For; t += f.Every {
		if t > 0 {
			out = append(out, step{t, false})
		}
		if t+f.Down < f.For {
			out = append(out, step{t + f.Down, true})
		}
	}
	return out
}

// Steps are when the link goes up and down again after Apply.
func (f *Flap) Steps() []time.Duration {
	var out []time.Duration
	for _, s := range f.plan() {
		out = append(out, s.at)
	}
	return out
}

// Step takes the link up or down: only down changes, so what else a
// second shell changed meanwhile stays.
func (f *Flap) Step(ctx context.Context, w World, i int) error {
	p := f.plan()
	if i < 0 || i >= len(p) {
		return fmt.Errorf("flap %s has no step %d", f.Link(), i)
	}
	word := "down"
	if p[i].up {
		word = "up"
	}
	return w.SetLink(f.From, f.To, f.Both, []string{word})
}

// Apply saves the directions and takes them down.
func (f *Flap) Apply(ctx context.Context, w World) (Heal, error) {
	sv, err := save(w, f.Directions())
	if err != nil {
		return nil, err
	}
	if err := w.SetLink(f.From, f.To, f.Both, []string{"down"}); err != nil {
		return nil, err
	}
	return func(context.Context) error { return sv.restore(w, f.Link()) }, nil
}
