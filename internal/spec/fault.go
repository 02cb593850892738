package spec

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"replab/internal/faultkind"
	"replab/internal/linkem"
)

// The fault schedule: [[fault]] tables. Each breaks a link, a node or a
// site at a time into the measure phase and, with for, heals it that much
// later.
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
// its server; the engine says which stages a node has. This file reads
// what a fault acts on (its subject), finds its kind (internal/faultkind,
// by do), checks when it happens and that faults do not overlap; the kind
// reads and checks its own keys.

// faultKeys are the keys of a [[fault]]: when, what it acts on, do, and
// every kind's own (set is the link kind's, listed where it always was).
var faultKeys = acceptedFaultKeys(faultkind.Default())

func acceptedFaultKeys(kinds *faultkind.Registry) []string {
	keys := []string{"at", "for", "link", "set", "node", "stage", "do", "site"}
	for _, k := range kinds.Keys() {
		if !contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys
}

// maxFaultTime bounds at and for (as [run] bounds its phases).
const maxFaultTime = 30 * 24 * time.Hour

// faultIn is a fault being read, with what the overlap check needs.
type faultIn struct {
	f      Fault
	p      path
	timed  bool             // at (and for, if given) are valid
	target bool             // what it acts on and its kind's keys are valid
	on     string           // the key naming what it acts on: link, node or site
	parts  []faultkind.Part // what it holds while in effect
	start  time.Duration    // [start, end) in the measure phase's time
	end    time.Duration    // math.MaxInt64: to the end of the run
	point  bool             // an instantaneous fault
}

// kinds is the registry of fault kinds the spec is read with.
func (c *decoder) kinds() *faultkind.Registry {
	if c.env != nil && c.env.kinds != nil {
		return c.env.kinds
	}
	return faultkind.Default()
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

// fault reads one [[fault]] table: what it acts on (its subject: a link, a
// node or a site) and its kind, which do names (a link without do is
// changed with set), then when. The kind reads and checks its own keys.
func (c *decoder) fault(s *Spec, p path, m map[string]any) *faultIn {
	fi := &faultIn{p: p, f: Fault{Line: c.d.line(p)}}
	kinds := c.kinds()
	c.checkKeys(p, m, acceptedFaultKeys(kinds), "[[fault]]")
	for _, k := range c.keysByPos(p, m) {
		c.remember(s, p.child(k))
	}
	sub, k, subjectOK := c.faultSubject(s, p, m, &fi.f, kinds)
	fi.on = sub.On
	if k != nil {
		fi.f.Kind = k.Name
		keysOK := c.faultKindKeys(p, m, kinds, k)
		// On a subject that is wrong the kind checks only its keys' form.
		var view faultkind.Spec
		if subjectOK {
			view = faultSpec{s: s, c: c}
		}
		act := k.Parse(&faultReader{c: c, p: p, m: m}, sub, view)
		if subjectOK && keysOK && act != nil {
			fi.f.Act, fi.target, fi.parts = act, true, act.Parts()
		}
	}
	c.faultWhen(s, p, m, fi, k)
	return fi
}

// faultSubject reads what a fault acts on and finds its kind: the subject
// (checked: ok says it is right) and the kind, nil when there is none to
// read the fault with.
func (c *decoder) faultSubject(s *Spec, p path, m map[string]any, f *Fault, kinds *faultkind.Registry) (sub faultkind.Subject, k *faultkind.Kind, ok bool) {
	_, hasLink := m["link"]
	_, hasNode := m["node"]
	_, hasSite := m["site"]
	_, hasSet := m["set"]
	_, hasDo := m["do"]
	var doKind *faultkind.Kind // the kind do names, whatever it acts on
	if d, ok := m["do"].(string); ok && strings.TrimSpace(d) != faultkind.SetName {
		doKind = kinds.Lookup(strings.TrimSpace(d))
	}
	has := map[string]bool{faultkind.OnLink: hasLink, faultkind.OnNode: hasNode, faultkind.OnSite: hasSite}
	subjects := 0
	for _, h := range has {
		if h {
			subjects++
		}
	}

	// What it acts on, and whether do goes with it.
	switch {
	case hasLink && hasNode:
		c.failAt(p.child("node"), `a fault acts on a link or on a node, not both: write two [[fault]] tables`)
	case hasSite && subjects > 1:
		c.failAt(p.child("site"), `a fault acts on a link, a node or a site, not two: write two [[fault]] tables`)
	case subjects == 0 && doKind != nil && doKind.On != faultkind.OnNode:
		c.fail(p.child("do"), m["do"], "%s acts on a %s: say which with %s", doKind.Name, doKind.On, subjectExample(doKind.On))
	case subjects == 0:
		c.failAt(p, "%s", `say what the fault acts on: link = "A<->B" with set = "down" (or "loss=5%", …), or node = "NAME" with do = "kill" (or stop, restart, pause, start, resume)`)
	}
	if hasSet && !hasLink {
		hint := ""
		if hasNode {
			hint = `; a node fault says what happens with do = "kill", "stop", …`
		}
		c.failAt(p.child("set"), `set changes a link: it goes with link = "A<->B"%s`, hint)
	}
	switch {
	case !hasDo, doKind != nil && has[doKind.On]:
	case doKind != nil && doKind.On != faultkind.OnNode:
		if subjects > 0 { // else said above
			c.fail(p.child("do"), m["do"], "%s acts on a %s: it goes with %s", doKind.Name, doKind.On, subjectExample(doKind.On))
		}
	case !hasNode && (doKind != nil || subjects == 0):
		hint := ""
		switch {
		case hasLink:
			hint = `; a link fault says what changes with set = "down", "loss=5%", …`
		case hasSite:
			hint = fmt.Sprintf("; a site fault says what happens with do = %s", strings.Join(quoted(kinds.Names(faultkind.OnSite)), ", "))
		}
		c.failAt(p.child("do"), `do acts on a node: it goes with node = "NAME"%s`, hint)
	}
	if _, hasStage := m["stage"]; hasStage && !hasNode {
		c.failAt(p.child("stage"), `stage names one of a node's replication stages: it goes with node = "NAME" and do = "kill" (or stop, restart, pause, …)`)
	}

	// Each subject given is checked; the kind is found when there is one.
	linkOK, nodeOK, siteOK := false, false, false
	var nodeKind, siteKind *faultkind.Kind
	if hasLink {
		linkOK = c.faultLink(s, p, m, f)
	}
	if hasNode {
		nodeOK = c.faultNode(s, p, m, f)
		nodeOK = c.faultStage(p, m, f) && nodeOK
		if hasDo {
			nodeKind = c.faultDo(p, m, kinds, faultkind.OnNode)
		} else {
			c.failAt(p.child("node"), "a node fault needs do: one of %s", strings.Join(kinds.Names(faultkind.OnNode), ", "))
		}
	}
	if hasSite {
		siteOK = c.faultSite(s, p, m, f)
		if hasDo {
			siteKind = c.faultDo(p, m, kinds, faultkind.OnSite)
		} else {
			c.failAt(p.child("site"), "a site fault needs do: one of %s", strings.Join(kinds.Names(faultkind.OnSite), ", "))
		}
	}
	sub = faultkind.Subject{From: f.From, To: f.To, Both: f.Both, Node: f.Node, Stage: f.Stage, Site: f.Site}
	switch {
	case subjects != 1:
	case hasLink:
		sub.On, ok = faultkind.OnLink, linkOK
		switch {
		case doKind != nil && doKind.On == faultkind.OnLink:
			k = doKind
		case hasDo && doKind == nil:
			k = c.faultDo(p, m, kinds, faultkind.OnLink)
		default: // a do for something else was refused above; set says what changes
			k = kinds.Lookup(faultkind.SetName)
		}
	case hasNode:
		sub.On, ok, k = faultkind.OnNode, nodeOK, nodeKind
	case hasSite:
		sub.On, ok, k = faultkind.OnSite, siteOK, siteKind
	}
	return sub, k, ok
}

// faultKindKeys reports the keys of other kinds than k: false if any.
func (c *decoder) faultKindKeys(p path, m map[string]any, kinds *faultkind.Registry, k *faultkind.Kind) bool {
	ok := true
	for _, key := range c.keysByPos(p, m) {
		owner := kinds.KeyOf(key)
		if owner == nil || owner == k || slices.ContainsFunc(k.Keys, func(x faultkind.Key) bool { return x.Name == key }) {
			continue
		}
		ok = false
		if _, hasLink := m["link"]; key == "set" && !hasLink {
			continue // said with the subject
		}
		c.failAt(p.child(key), "%s goes with %s, not with %s%s", key, kindWords(owner), kindWords(k), keysOf(k))
	}
	return ok
}

// faultWhen reads at and for: when a fault of kind k (nil: unknown)
// happens, and how long until it is healed.
func (c *decoder) faultWhen(s *Spec, p path, m map[string]any, fi *faultIn, k *faultkind.Kind) {
	f := &fi.f
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
		case k != nil && k.Instant != "":
			c.fail(p.child("for"), v, "do = %q is instantaneous and takes no for; remove for (%s)", k.Name, k.Instant)
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
		case k != nil && k.Instant != "":
			fi.point, fi.end = true, f.At+1
		}
	}
}

// subjectExample is how a [[fault]] names a subject of kind on.
func subjectExample(on string) string {
	switch on {
	case faultkind.OnLink:
		return `link = "A<->B"`
	case faultkind.OnSite:
		return `site = "NAME"`
	}
	return `node = "NAME"`
}

// kindWords names a kind as a [[fault]] writes it.
func kindWords(k *faultkind.Kind) string {
	if k.Name == faultkind.SetName {
		return "a link fault without do"
	}
	return fmt.Sprintf("do = %q", k.Name)
}

// keysOf says which keys of its own k takes.
func keysOf(k *faultkind.Kind) string {
	var names []string
	for _, key := range k.Keys {
		names = append(names, key.Name)
	}
	if len(names) == 0 {
		return ", which takes no other keys"
	}
	return ", which takes " + strings.Join(names, ", ")
}

// faultReader is a [[fault]] table as a kind reads it: its problems are
// the spec's errors at the key's line.
type faultReader struct {
	c *decoder
	p path
	m map[string]any
}

func (r *faultReader) Has(key string) bool { _, ok := r.m[key]; return ok }

func (r *faultReader) Value(key string) any { return r.m[key] }

func (r *faultReader) String(key, want string) (string, bool) {
	v, ok := r.c.get(r.p, r.m, key, kString, want)
	if !ok {
		return "", false
	}
	return v.(string), true
}

func (r *faultReader) Duration(key, want string) (time.Duration, bool) {
	v, ok := r.String(key, want)
	if !ok {
		return 0, false
	}
	d, msg := parseDurationMax(v, maxFaultTime)
	if msg != "" {
		r.c.fail(r.p.child(key), v, "%s", msg)
		return 0, false
	}
	return d, true
}

func (r *faultReader) For() (time.Duration, bool) {
	v, ok := r.m["for"].(string)
	if !ok {
		return 0, false
	}
	d, msg := parseDurationMax(v, maxFaultTime)
	return d, msg == "" && d > 0
}

func (r *faultReader) Fail(key, format string, args ...any) {
	if key == "" {
		r.c.failAt(r.p, format, args...)
		return
	}
	r.c.fail(r.p.child(key), r.m[key], format, args...)
}

func (r *faultReader) FailAt(key, format string, args ...any) {
	if key == "" {
		r.c.failAt(r.p, format, args...)
		return
	}
	r.c.failAt(r.p.child(key), format, args...)
}

// faultSpec is the spec as a kind checks a fault against it.
type faultSpec struct {
	s *Spec
	c *decoder
}

func (v faultSpec) Links() [][2]string {
	out := make([][2]string, len(v.s.Links))
	for i, l := range v.s.Links {
		out[i] = [2]string{l.A, l.B}
	}
	return out
}

func (v faultSpec) Direction(from, to string) (linkem.Params, bool) {
	l := v.s.linkBetween(from, to)
	if l == nil {
		return linkem.Params{}, false
	}
	return l.direction(from), true
}

func (v faultSpec) Change(p *linkem.Params, change string) error {
	baseDir := ""
	if v.c.env != nil {
		baseDir = v.c.env.baseDir
	}
	return ApplyKV(p, change, baseDir)
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
	if s.Node(f.Node) != nil || f.Node == faultkind.PrimaryNode {
		return true
	}
	var names []string
	for _, n := range s.Nodes {
		names = append(names, n.Name)
	}
	c.fail(p.child("node"), v, "unknown node %q%s; nodes: %s, or %q (whichever takes writes then)", clean(f.Node), didYouMean(f.Node, names), strings.Join(names, ", "), faultkind.PrimaryNode)
	return false
}

// faultStage reads stage = "NAME": one of a node's replication stages,
// which the engine checks (what a stage can have done to it is the kind's).
func (c *decoder) faultStage(p path, m map[string]any, f *Fault) bool {
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
	return true
}

// faultSite reads site = "NAME": a [site.NAME] of the spec.
func (c *decoder) faultSite(s *Spec, p path, m map[string]any, f *Fault) bool {
	v, ok := c.get(p, m, "site", kString, `a site name like "eu"`)
	if !ok {
		return false
	}
	f.Site = strings.TrimSpace(v.(string))
	if f.Site == faultkind.PrimaryNode {
		if s.Engine == nil {
			c.fail(p.child("site"), v, `site = %q is the site of the node that takes writes: it needs an engine and nodes`, faultkind.PrimaryNode)
			return false
		}
		return true
	}
	var names []string
	for _, st := range s.Sites {
		if st.Name == f.Site {
			return true
		}
		names = append(names, st.Name)
	}
	c.fail(p.child("site"), v, "unknown site %q%s; defined sites: %s, or %q (the site of the node that takes writes then)", clean(f.Site), didYouMean(f.Site, names), strings.Join(names, ", "), faultkind.PrimaryNode)
	return false
}

// faultDo reads do for a fault that acts on on: one of the kinds that act
// on it. A kind that acts on something else is refused where do is checked
// against what the fault acts on; nil then, and for an unknown action.
func (c *decoder) faultDo(p path, m map[string]any, kinds *faultkind.Registry, on string) *faultkind.Kind {
	names := kinds.Names(on)
	v, ok := c.get(p, m, "do", kString, "one of "+strings.Join(quoted(names), ", "))
	if !ok {
		return nil
	}
	do := strings.TrimSpace(v.(string))
	k := kinds.Lookup(do)
	switch {
	case k != nil && k.On == on && do != faultkind.SetName:
		return k
	case k != nil && do != faultkind.SetName:
		return nil
	}
	c.fail(p.child("do"), v, "unknown action%s; do is one of %s", didYouMean(do, names), strings.Join(names, ", "))
	return nil
}

func quoted(list []string) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// checkOverlaps reports two faults that hold one link direction or one
// node (or stage) at overlapping times, at the later one's subject.
func (c *decoder) checkOverlaps(in []*faultIn) {
	for j, b := range in {
		if !b.timed || !b.target {
			continue
		}
		for _, a := range in[:j] {
			if !a.timed || !a.target || !(a.start < b.end && b.start < a.end) {
				continue
			}
			if part, ok := sharedPart(a, b); ok {
				c.failAt(b.p.child(b.on), "overlaps %s (line %d) on %s: %s is %s, this one %s; faults on one %s must not overlap in time%s",
					a.p, a.f.Line, part, a.p, a.span(), b.span(), part.Class(), a.hint())
				break
			}
		}
	}
}

// sharedPart returns the first of b's parts that a holds too.
func sharedPart(a, b *faultIn) (faultkind.Part, bool) {
	for _, pb := range b.parts {
		if slices.Contains(a.parts, pb) {
			return pb, true
		}
	}
	return faultkind.Part{}, false
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
