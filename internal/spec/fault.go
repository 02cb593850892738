package spec

import (
	"fmt"
	"math"
	"strings"
	"time"

	"replab/internal/linkem"
)

// The fault schedule: [[fault]] tables. Each breaks a link or a node at a
// time into the measure phase and, with for, heals it that much later.
//
//	[[fault]]
//	at = "10s"
//	for = "20s"
//	link = "primary<->asia"
//	set = "down"
//
//	[[fault]]
//	at = "15s"
//	node = "e1"
//	do = "kill"
//
// With stage, a node fault acts on one of the node's replication stages
// (the pipeline scheme's extract, pump, collector or replicat) instead of
// its server; the engine says which stages a node has.

var faultKeys = []string{"at", "for", "link", "set", "node", "stage", "do"}

// maxFaultTime bounds at and for (as [run] bounds its phases).
const maxFaultTime = 30 * 24 * time.Hour

// faultIn is a fault being read, with what the overlap check needs.
type faultIn struct {
	f      Fault
	p      path
	timed  bool               // at (and for, if given) are valid
	target bool               // the link or node it acts on is valid
	dirs   map[[2]string]bool // a link fault's directions
	start  time.Duration      // [start, end) in the measure phase's time
	end    time.Duration      // math.MaxInt64: to the end of the run
	point  bool               // an instantaneous node fault
}

// faults reads every [[fault]]; it runs after the sites, links, nodes and
// [run], which it refers to.
func (c *decoder) faults(root map[string]any, s *Spec) []Fault {
	v, present := root["fault"]
	if !present {
		return nil
	}
	p := path{"fault"}
	c.remember(s, p)
	arr, ok := v.([]any)
	if !ok {
		c.fail(p, v, "want a list of faults: write each one as [[fault]] (double brackets)")
		return nil
	}
	var in []*faultIn
	for i, fv := range arr {
		fp := p.child(idx(i))
		c.remember(s, fp)
		m, ok := c.table(fp, fv, "write each fault as a [[fault]] table")
		if !ok {
			continue
		}
		in = append(in, c.fault(s, fp, m))
	}
	c.checkOverlaps(in)
	out := make([]Fault, 0, len(in))
	for _, fi := range in {
		out = append(out, fi.f)
	}
	return out
}

// fault reads one [[fault]] table.
func (c *decoder) fault(s *Spec, p path, m map[string]any) *faultIn {
	fi := &faultIn{p: p, f: Fault{Line: c.d.line(p)}}
	c.checkKeys(p, m, faultKeys, "[[fault]]")
	for _, k := range c.keysByPos(p, m) {
		c.remember(s, p.child(k))
	}
	f := &fi.f
	_, hasLink := m["link"]
	_, hasNode := m["node"]
	_, hasSet := m["set"]
	_, hasDo := m["do"]

	// What it acts on.
	switch {
	case hasLink && hasNode:
		c.failAt(p.child("node"), `a fault acts on a link or on a node, not both: write two [[fault]] tables`)
	case !hasLink && !hasNode:
		c.failAt(p, "%s", `say what the fault acts on: link = "A<->B" with set = "down" (or "loss=5%", …), or node = "NAME" with do = "kill" (or stop, restart, pause, start, resume)`)
	}
	if hasSet && !hasLink {
		hint := ""
		if hasNode {
			hint = `; a node fault says what happens with do = "kill", "stop", …`
		}
		c.failAt(p.child("set"), `set changes a link: it goes with link = "A<->B"%s`, hint)
	}
	if hasDo && !hasNode {
		hint := ""
		if hasLink {
			hint = `; a link fault says what changes with set = "down", "loss=5%", …`
		}
		c.failAt(p.child("do"), `do acts on a node: it goes with node = "NAME"%s`, hint)
	}
	if hasLink {
		linkOK := c.faultLink(s, p, m, f)
		setOK := false
		if hasSet {
			setOK = c.faultSet(s, p, m, f, linkOK)
		} else {
			c.failAt(p.child("link"), "%s", `a link fault needs set: what changes, like set = "down", set = "loss=5%" or set = ["delay=400ms", "loss=1%"]`)
		}
		if linkOK && setOK && !hasNode {
			fi.target = true
			fi.dirs = map[[2]string]bool{{f.From, f.To}: true}
			if f.Both {
				fi.dirs[[2]string{f.To, f.From}] = true
			}
		}
	}
	doOK := false
	if hasNode {
		nodeOK := c.faultNode(s, p, m, f)
		if hasDo {
			doOK = c.faultDo(p, m, f)
		} else {
			c.failAt(p.child("node"), "a node fault needs do: one of %s", strings.Join(FaultDos, ", "))
		}
		stageOK := c.faultStage(p, m, f, doOK)
		fi.target = nodeOK && doOK && stageOK && !hasLink
	} else if _, hasStage := m["stage"]; hasStage {
		c.failAt(p.child("stage"), `stage names one of a node's replication stages: it goes with node = "NAME" and do = "kill" (or stop, restart, pause, …)`)
	}

	// When.
	atOK := false
	if v, ok := c.get(p, m, "at", kString, `a string with a unit, like "10s": when the fault happens, counted from the start of the measure phase`); ok {
		d, msg := parseDurationMax(v.(string), maxFaultTime)
		switch {
		case msg != "":
			c.fail(p.child("at"), v, "%s", msg)
		case d >= s.Run.Duration:
			c.fail(p.child("at"), v, "a time past the end of the measure phase, which lasts %v ([run] duration); want at from 0s to below %v", s.Run.Duration, s.Run.Duration)
		default:
			f.At, atOK = d, true
		}
	} else if _, present := m["at"]; !present {
		c.failAt(p, `at is required: when the fault happens, counted from the start of the measure phase, e.g. at = "10s"`)
	}
	forOK := true
	if v, ok := c.get(p, m, "for", kString, `a string with a unit, like "20s": how long until the fault is healed`); ok {
		forOK = false
		d, msg := parseDurationMax(v.(string), maxFaultTime)
		runEnd := s.Run.Duration + s.Run.Cooldown
		switch {
		case msg != "":
			c.fail(p.child("for"), v, "%s", msg)
		case d == 0:
			c.fail(p.child("for"), v, "want a duration above 0; leave for out for a fault the schedule does not heal")
		case hasDo && doOK && FaultHeal(f.Do) == "":
			c.fail(p.child("for"), v, "do = %q is instantaneous and takes no for; remove for (to take a node away for a while, use do = \"stop\", \"kill\" or \"pause\" with for)", f.Do)
		case atOK && f.At+d > runEnd:
			c.fail(p.child("for"), v, "a time past the end: healed at %v, but the run ends at %v (measure phase %v + cooldown %v); want for at most %v, or lengthen [run] duration or cooldown",
				f.At+d, runEnd, s.Run.Duration, s.Run.Cooldown, runEnd-f.At)
		default:
			f.For, forOK = d, true
		}
	} else if _, present := m["for"]; present {
		forOK = false
	}
	if atOK && forOK {
		fi.timed = true
		fi.start, fi.end = f.At, math.MaxInt64
		switch {
		case f.For > 0:
			fi.end = f.At + f.For
		case hasNode && contains(FaultDos, f.Do) && FaultHeal(f.Do) == "":
			fi.point, fi.end = true, f.At+1
		}
	}
	return fi
}

// faultLink reads link = "A<->B" or "A->B": two sites joined by a [[link]].
func (c *decoder) faultLink(s *Spec, p path, m map[string]any, f *Fault) bool {
	v, ok := c.get(p, m, "link", kString, `a string like "primary<->asia" (both directions) or "primary->asia" (one)`)
	if !ok {
		return false
	}
	kp := p.child("link")
	f.Link = v.(string)
	t := strings.TrimSpace(f.Link)
	var a, b string
	if x, y, ok := strings.Cut(t, "<->"); ok {
		a, b, f.Both = x, y, true
	} else if x, y, ok := strings.Cut(t, "->"); ok {
		a, b = x, y
	}
	a, b = strings.TrimSpace(a), strings.TrimSpace(b)
	if a == "" || b == "" || strings.Contains(b, "->") || strings.Contains(a, "<-") {
		c.fail(kp, v, `want "A<->B" (both directions) or "A->B" (one direction) between two linked sites, like "primary<->asia"`)
		f.Both = false
		return false
	}
	var names []string
	known := map[string]bool{}
	for _, st := range s.Sites {
		names = append(names, st.Name)
		known[st.Name] = true
	}
	ok = true
	for _, n := range []string{a, b} {
		if !known[n] {
			c.fail(kp, v, "unknown site %q%s; defined sites: %s", clean(n), didYouMean(n, names), strings.Join(names, ", "))
			ok = false
		}
	}
	if !ok {
		return false
	}
	if a == b {
		c.fail(kp, v, "a link joins two different sites")
		return false
	}
	if s.linkBetween(a, b) == nil {
		var links []string
		for _, l := range s.Links {
			links = append(links, l.Name())
		}
		have := "there are none"
		if len(links) > 0 {
			have = strings.Join(links, ", ")
		}
		c.fail(kp, v, "no [[link]] joins %s and %s; a fault acts on one [[link]]: %s", a, b, have)
		return false
	}
	f.From, f.To = a, b
	return true
}

// linkBetween returns the [[link]] joining a and b (in either order) or nil.
func (s *Spec) linkBetween(a, b string) *Link {
	for i := range s.Links {
		l := &s.Links[i]
		if l.A == a && l.B == b || l.A == b && l.B == a {
			return l
		}
	}
	return nil
}

// direction returns the parameters of the direction from -> to of l.
func (l *Link) direction(from string) linkem.Params {
	if from == l.A {
		return l.Forward
	}
	return l.Reverse
}

const setWant = `want what changes on the link: "down", "up", or key=value pairs like "loss=5%" or "delay=400ms loss=1%", or a list like ["delay=400ms", "loss=1%"]`

// faultSet reads set: a string of changes or a list of them, each checked
// as `replab link set` checks it (ApplyKV) on the fault's directions. When
// the link is unusable only the form is checked.
func (c *decoder) faultSet(s *Spec, p path, m map[string]any, f *Fault, linkOK bool) bool {
	kp := p.child("set")
	v := m["set"]
	var changes []string
	switch x := v.(type) {
	case string:
		changes = splitChanges(x)
	case []any:
		for _, e := range x {
			str, ok := e.(string)
			if !ok {
				c.fail(kp, v, "%s", setWant)
				return false
			}
			if str = strings.TrimSpace(str); str != "" {
				changes = append(changes, str)
			}
		}
	default:
		c.fail(kp, v, "%s", setWant)
		return false
	}
	if len(changes) == 0 {
		c.fail(kp, v, "empty; %s", setWant)
		return false
	}
	f.Set = changes
	if !linkOK {
		for _, msg := range c.applySet(nil, changes) {
			if msg != "" {
				c.fail(kp, v, "%s", msg)
			}
		}
		return false
	}
	l := s.linkBetween(f.From, f.To)
	dirs := [][2]string{{f.From, f.To}}
	if f.Both {
		dirs = append(dirs, [2]string{f.To, f.From})
	}
	var msgs [][]string // by direction, by change
	for _, d := range dirs {
		p := l.direction(d[0])
		msgs = append(msgs, c.applySet(&p, changes))
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
			c.fail(kp, v, "%s", msg)
		}
	}
	return ok
}

// applySet applies changes in order to p, a copy of a direction's
// parameters, as `replab link set` would, and returns for each change the
// message of its error or "" (a change that fails changes nothing). With p
// nil (the link is unusable) it only refuses changes to the mtu.
func (c *decoder) applySet(p *linkem.Params, changes []string) []string {
	const fixed = "the mtu cannot change during a run (it is fixed when the lab is built)"
	baseDir := ""
	if c.env != nil {
		baseDir = c.env.baseDir
	}
	msgs := make([]string, len(changes))
	for i, kv := range changes {
		k, val, _ := strings.Cut(kv, "=")
		k, val = strings.TrimSpace(k), strings.TrimSpace(val)
		if k == "mtu" {
			msgs[i] = (&Error{Field: k, Value: clean(val), Msg: fixed + "; set mtu in the [[link]] instead"}).Error()
			continue
		}
		if p == nil {
			continue
		}
		q := *p
		if err := ApplyKV(&q, kv, baseDir); err != nil {
			msgs[i] = err.Error()
			continue
		}
		if q.MTU != p.MTU {
			msgs[i] = (&Error{Field: k, Value: clean(val), Msg: fmt.Sprintf("changes the mtu from %d to %d bytes; %s", p.MTU, q.MTU, fixed)}).Error()
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

// faultNode reads node = "NAME": a [node.NAME] of the spec.
func (c *decoder) faultNode(s *Spec, p path, m map[string]any, f *Fault) bool {
	v, ok := c.get(p, m, "node", kString, `a node name like "e1"`)
	if !ok {
		return false
	}
	f.Node = strings.TrimSpace(v.(string))
	if s.Engine == nil {
		c.fail(p.child("node"), v, `node faults need an engine and nodes: add [engine] with kind = "postgres" and [node.NAME] tables`)
		return false
	}
	if s.Node(f.Node) != nil {
		return true
	}
	var names []string
	for _, n := range s.Nodes {
		names = append(names, n.Name)
	}
	c.fail(p.child("node"), v, "unknown node %q%s; nodes: %s", clean(f.Node), didYouMean(f.Node, names), strings.Join(names, ", "))
	return false
}

// faultStage reads stage = "NAME": one of a node's replication stages,
// which the engine checks. A stage is a process, not a server: it cannot
// be promoted.
func (c *decoder) faultStage(p path, m map[string]any, f *Fault, doOK bool) bool {
	if _, present := m["stage"]; !present {
		return true
	}
	v, ok := c.get(p, m, "stage", kString, `a stage name like "replicat"`)
	if !ok {
		return false
	}
	st := strings.TrimSpace(v.(string))
	if !identRE.MatchString(st) {
		c.fail(p.child("stage"), v, `want a stage name like "extract", "pump", "collector" or "replicat"`)
		return false
	}
	f.Stage = st
	if doOK && f.Do == FaultPromote {
		c.fail(p.child("do"), f.Do, "a stage is a process, not a server: it can be killed, stopped, started, restarted, paused or resumed, not promoted")
		return false
	}
	return true
}

// faultDo reads do: one of FaultDos.
func (c *decoder) faultDo(p path, m map[string]any, f *Fault) bool {
	v, ok := c.get(p, m, "do", kString, "one of "+strings.Join(quoted(FaultDos), ", "))
	if !ok {
		return false
	}
	do := strings.TrimSpace(v.(string))
	switch {
	case contains(FaultDos, do):
		f.Do = do
		return true
	default:
		c.fail(p.child("do"), v, "unknown action%s; do is one of %s", didYouMean(do, FaultDos), strings.Join(FaultDos, ", "))
	}
	return false
}

func quoted(list []string) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// checkOverlaps reports two faults on one link direction or one node whose
// times overlap, at the later one's link or node.
func (c *decoder) checkOverlaps(in []*faultIn) {
	for j, b := range in {
		if !b.timed || !b.target {
			continue
		}
		for _, a := range in[:j] {
			if !a.timed || !a.target || !(a.start < b.end && b.start < a.end) {
				continue
			}
			if b.f.Node != "" && a.f.Node == b.f.Node && a.f.Stage == b.f.Stage {
				c.failAt(b.p.child("node"), "overlaps %s (line %d) on %s: %s is %s, this one %s; faults on one node must not overlap in time%s",
					a.p, a.f.Line, b.f.NodeTarget(), a.p, a.span(), b.span(), a.hint())
				break
			}
			if b.f.Node == "" && a.f.Node == "" {
				if d, ok := sharedDirection(a, b); ok {
					c.failAt(b.p.child("link"), "overlaps %s (line %d) on %s: %s is %s, this one %s; faults on one link direction must not overlap in time%s",
						a.p, a.f.Line, d, a.p, a.span(), b.span(), a.hint())
					break
				}
			}
		}
	}
}

// sharedDirection returns a direction both link faults act on.
func sharedDirection(a, b *faultIn) (string, bool) {
	for _, d := range [][2]string{{b.f.From, b.f.To}, {b.f.To, b.f.From}} {
		if b.dirs[d] && a.dirs[d] {
			return d[0] + "->" + d[1], true
		}
	}
	return "", false
}

// span says when a fault acts, for overlap errors.
func (fi *faultIn) span() string {
	switch {
	case fi.point:
		return "at " + fi.start.String()
	case fi.end == math.MaxInt64:
		return fmt.Sprintf("from %v to the end of the run", fi.start)
	}
	return fmt.Sprintf("from %v to %v", fi.start, fi.end)
}

// hint tells how an overlap with fi can be undone.
func (fi *faultIn) hint() string {
	if fi.end == math.MaxInt64 {
		return fmt.Sprintf(" (a fault without for lasts to the end of the run: give %s a for)", fi.p)
	}
	return ""
}
