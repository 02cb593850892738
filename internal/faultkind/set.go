package faultkind

import (
	"context"
	"fmt"
	"strings"

	"replab/internal/linkem"
)

// SetName is the kind of a link fault with set: replab link set's changes
// to one or both directions of a link. A [[fault]] gives it without do:
//
//	link = "primary<->eu"   # both directions; "primary->eu" is one: a one-way partition
//	set = "down"            # or "loss=5%", "delay=400ms rate=64kbit", ["delay=400ms", "loss=1%"]
const SetName = "set"

func init() {
	Register(Kind{
		Name:  SetName,
		On:    OnLink,
		About: "change the link's directions with link set's keys (down, loss=5%, delay=400ms, …)",
		Keys:  []Key{{"set", `what changes: "down", "loss=5%", "delay=400ms rate=64kbit", or a list of changes`}},
		Heal:  "parameters before it put back",
		Parse: parseSet,
	})
}

// Set changes a link's directions; its heal puts back exactly the
// parameters they had before.
type Set struct {
	Subject
	Changes []string // in link set's vocabulary, applied in order
}

const setWant = `want what changes on the link: "down", "up", or key=value pairs like "loss=5%" or "delay=400ms loss=1%", or a list like ["delay=400ms", "loss=1%"]`

// parseSet reads set: a string of changes or a list of them, each checked
// as replab link set checks it on the fault's directions. Without a spec,
// or on a link the spec does not have, only the form is checked.
func parseSet(r Reader, sub Subject, s Spec) Fault {
	if !r.Has("set") {
		r.FailAt("link", "%s", `a link fault needs set: what changes, like set = "down", set = "loss=5%" or set = ["delay=400ms", "loss=1%"]`)
		return nil
	}
	var changes []string
	switch x := r.Value("set").(type) {
	case string:
		changes = splitChanges(x)
	case []any:
		for _, e := range x {
			str, ok := e.(string)
			if !ok {
				r.Fail("set", "%s", setWant)
				return nil
			}
			if str = strings.TrimSpace(str); str != "" {
				changes = append(changes, str)
			}
		}
	default:
		r.Fail("set", "%s", setWant)
		return nil
	}
	if len(changes) == 0 {
		r.Fail("set", "empty; %s", setWant)
		return nil
	}
	dirs := sub.Directions()
	var params []linkem.Params
	for _, d := range dirs {
		if s == nil {
			break
		}
		p, ok := s.Direction(d[0], d[1])
		if !ok {
			params = nil
			break
		}
		params = append(params, p)
	}
	if params == nil {
		ok := true
		for _, msg := range checkChanges(s, nil, changes) {
			if msg != "" {
				r.Fail("set", "%s", msg)
				ok = false
			}
		}
		if !ok {
			return nil
		}
		return &Set{Subject: sub, Changes: changes}
	}
	var msgs [][]string // by direction, by change
	for i := range dirs {
		msgs = append(msgs, checkChanges(s, &params[i], changes))
	}
	ok := true
	for i := range changes {
		for j := range dirs {
			msg := msgs[j][i]
			if msg == "" {
				continue
			}
			ok = false
			if len(dirs) == 2 && msgs[1-j][i] == msg {
				if j == 1 {
					continue // both directions say the same: once is enough
				}
			} else if len(dirs) == 2 {
				msg += fmt.Sprintf(" (direction %s->%s)", dirs[j][0], dirs[j][1])
			}
			r.Fail("set", "%s", msg)
		}
	}
	if !ok {
		return nil
	}
	return &Set{Subject: sub, Changes: changes}
}

// checkChanges applies changes in order to p, a copy of a direction's
// parameters, as replab link set would, and returns for each change the
// message of its error or "" (a change that fails changes nothing). With p
// nil (no direction to check them on) it only refuses changes to the mtu.
func checkChanges(s Spec, p *linkem.Params, changes []string) []string {
	const fixed = "the mtu cannot change during a run (it is fixed when the lab is built)"
	msgs := make([]string, len(changes))
	for i, kv := range changes {
		k, val, _ := strings.Cut(kv, "=")
		k, val = strings.TrimSpace(k), strings.TrimSpace(val)
		if k == "mtu" {
			msgs[i] = k + " = " + clean(val) + ": " + fixed + "; set mtu in the [[link]] instead"
			continue
		}
		if p == nil {
			continue
		}
		q := *p
		if err := s.Change(&q, kv); err != nil {
			msgs[i] = err.Error()
			continue
		}
		if q.MTU != p.MTU {
			msgs[i] = fmt.Sprintf("%s = %s: changes the mtu from %d to %d bytes; %s", k, clean(val), p.MTU, q.MTU, fixed)
			continue
		}
		*p = q
	}
	return msgs
}

// splitChanges splits "delay=400ms loss=1%" into its changes. A word
// without '=' continues the change before it ("loss=gemodel 1% 10% 100%
// 0%"), except the bare words down and up; spaces around '=' are allowed.
func splitChanges(s string) []string {
	var out []string
	words := strings.Fields(s)
	for i, w := range words {
		n := len(out)
		startsKey := i+1 < len(words) && strings.HasPrefix(words[i+1], "=") // "rate =1mbit"
		join := n > 0 && w != "down" && w != "up" &&
			(strings.HasPrefix(w, "=") || strings.HasSuffix(out[n-1], "=") ||
				!strings.Contains(w, "=") && !startsKey && strings.Contains(out[n-1], "="))
		if join {
			out[n-1] += " " + w
		} else {
			out = append(out, w)
		}
	}
	return out
}

// Describe: "link a<->b set loss=5% delay=400ms".
func (f *Set) Describe() string {
	return "link " + f.Link() + " set " + strings.Join(f.Changes, " ")
}

// Parts are the directions it changes.
func (f *Set) Parts() []Part { return dirParts(f.Directions()) }

// Apply changes the directions after saving them.
func (f *Set) Apply(ctx context.Context, w World) (Heal, error) {
	sv, err := save(w, f.Directions())
	if err != nil {
		return nil, err
	}
	if err := w.SetLink(f.From, f.To, f.Both, f.Changes); err != nil {
		return nil, err
	}
	return func(context.Context) error { return sv.restore(w, f.Link()) }, nil
}
