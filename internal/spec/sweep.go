package spec

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// A sweep varies spec values: [sweep] maps a field path to the list of
// values it takes, and the run covers every combination (the matrix).
//
//	[sweep]
//	"link[1].rate" = ["9.6kbit", "19.2kbit", "115.2kbit"]
//	"scheme.replication" = ["async", "sync"]
//	"run.users" = [3, 30, 300]
//
// A path names a key as the spec writes it: table.key, link[N].key (N
// counts from 1), link[N].reverse.key, site.NAME.key, node.NAME.key,
// node.NAME.settings.key, workload.key, run.key, scheme.key. The path
// "nodes" keeps the spec's first N nodes and drops the others: the number
// of replicas swept.
//
// The key "case" sweeps settings that go together: each value is a table
// of paths and values set at once, named by its "name" (the point's label
// and the sweep table's column), so that configurations that differ in
// several keys are one axis of the matrix:
//
//	case = [
//	  { name = "async", "workload.reads_at" = "replica" },
//	  { name = "remote_apply", "scheme.replication" = "sync", "scheme.commit" = "remote_apply" },
//	]

// SweepParam is one swept field.
type SweepParam struct {
	Path   string
	Values []any // TOML values as parsed
	Line   int
}

// Point is one combination of a sweep: a complete, validated spec.
type Point struct {
	Label  string         // "run.users=30, link[1].rate=19.2kbit"
	Values map[string]any // path -> value
	Spec   *Spec
}

// MaxSweepPoints bounds a sweep's matrix.
const MaxSweepPoints = 1000

var sweepSegRE = regexp.MustCompile(`^([A-Za-z0-9_-]+)(?:\[(\d+)\])?$`)

// sweep reads [sweep] (structure only; values are checked per point).
func (c *decoder) sweep(root map[string]any, s *Spec) {
	v, present := root["sweep"]
	if !present {
		return
	}
	p := path{"sweep"}
	c.remember(s, p)
	m, ok := c.table(p, v, `write [sweep] with "run.users" = [3, 30, 300]`)
	if !ok {
		return
	}
	total := 1
	for _, k := range c.keysByPos(p, m) {
		kp := p.child(k)
		c.remember(s, kp)
		arr, ok := m[k].([]any)
		if !ok || len(arr) == 0 {
			c.fail(kp, m[k], "want a non-empty list of values, like [3, 30, 300]")
			continue
		}
		if _, err := splitSweepPath(k); err != nil {
			c.failAt(kp, "%v", err)
			continue
		}
		if k == "lab.name" {
			c.failAt(kp, "the lab name cannot be swept")
			continue
		}
		if k == SweepCase && !c.sweepCases(kp, arr) {
			continue
		}
		total *= len(arr)
		s.Sweep = append(s.Sweep, SweepParam{Path: k, Values: arr, Line: c.d.line(kp)})
	}
	if total > MaxSweepPoints {
		c.failAt(p, "the sweep has %d combinations; at most %d", total, MaxSweepPoints)
	}
}

// SweepCase is the sweep key whose values are tables of settings that go
// together, each named.
const SweepCase = "case"

// sweepCases checks case = [{name = "…", "path" = value, …}, …]: every
// case a table with a name of its own and settable paths.
func (c *decoder) sweepCases(p path, arr []any) bool {
	names := map[string]bool{}
	ok := true
	for i, v := range arr {
		m, isMap := v.(map[string]any)
		if !isMap {
			c.failAt(p, "case %d: want a table like { name = \"async\", \"scheme.replication\" = \"async\" }", i+1)
			ok = false
			continue
		}
		name, _ := m["name"].(string)
		switch {
		case name == "":
			c.failAt(p, "case %d: give it a name (name = \"…\"): it labels the point", i+1)
			ok = false
		case names[name]:
			c.failAt(p, "case %d: the name %q is taken by another case", i+1, name)
			ok = false
		}
		names[name] = true
		for k := range m {
			if k == "name" {
				continue
			}
			if _, err := splitSweepPath(k); err != nil {
				c.failAt(p, "case %q: %v", name, err)
				ok = false
			} else if k == "lab.name" || k == SweepCase {
				c.failAt(p, "case %q: %s cannot be set by a case", name, k)
				ok = false
			}
		}
	}
	return ok
}

// caseSettings are a case's paths, in order, and its name.
func caseSettings(v any) (name string, keys []string, m map[string]any) {
	m, _ = v.(map[string]any)
	name, _ = m["name"].(string)
	for k := range m {
		if k != "name" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return name, keys, m
}

// splitSweepPath turns "link[1].reverse.rate" into decoder path segments.
func splitSweepPath(pth string) (path, error) {
	var out path
	for _, seg := range strings.Split(pth, ".") {
		m := sweepSegRE.FindStringSubmatch(seg)
		if m == nil {
			return nil, fmt.Errorf("%q is not a field path; write table.key, link[N].key, site.NAME.key, …", pth)
		}
		out = append(out, m[1])
		if m[2] != "" {
			n, _ := strconv.Atoi(m[2])
			if n < 1 {
				return nil, fmt.Errorf("%q: indices count from 1", pth)
			}
			out = append(out, idx(n-1))
		}
	}
	return out, nil
}

// Points expands the sweep into one spec per combination, in order (the
// last parameter varies fastest). A spec without a sweep has one point:
// itself. Every combination is checked: the error lists each bad one with
// its errors (naming the sweep line, and quoting the swept value), and
// the points returned are the good ones.
func (s *Spec) Points() ([]Point, error) {
	all, err := s.PointsForCheck()
	if err != nil {
		return nil, err
	}
	var points []Point
	var bad []error
	for _, p := range all {
		if errs := p.Spec.ReadErrors(); len(errs) > 0 {
			bad = append(bad, &PointError{Label: p.Label, Err: errs})
			continue
		}
		points = append(points, p)
	}
	return points, errors.Join(bad...)
}

// PointsForCheck is Points for a caller that goes on checking each point
// (runner.Validate): every combination, in order, those with errors as
// far as they could be read and carrying their errors (ReadErrors), as
// LoadForCheck returns a spec. The error is a swept path that cannot be
// set: every point would say so.
func (s *Spec) PointsForCheck() ([]Point, error) {
	if len(s.Sweep) == 0 {
		return []Point{{Spec: s, Values: map[string]any{}}}, nil
	}
	var points []Point
	idx := make([]int, len(s.Sweep))
	for {
		values := map[string]any{}
		var label []string
		root := deepCopy(s.raw.root).(map[string]any)
		delete(root, "sweep")
		// A swept value is written on its [sweep] line: errors about it
		// point there and quote it, not the base spec's value.
		pos := maps.Clone(s.raw.pos)
		var setErr error
		for i, sp := range s.Sweep {
			v := sp.Values[idx[i]]
			if sp.Path == SweepCase {
				name, keys, m := caseSettings(v)
				values[sp.Path] = name
				label = append(label, sp.Path+"="+showValue(name))
				for _, k := range keys {
					if k == SweepNodes {
						if err := s.keepNodes(root, m[k]); err != nil && setErr == nil {
							setErr = &Error{File: s.name, Line: sp.Line, Field: "sweep.case", Msg: fmt.Sprintf("case %q: %v", name, err)}
						}
						continue
					}
					if err := setPath(root, k, m[k]); err != nil && setErr == nil {
						setErr = &Error{File: s.name, Line: sp.Line, Field: "sweep.case", Msg: fmt.Sprintf("case %q: %v", name, err)}
					}
					if segs, err := splitSweepPath(k); err == nil {
						at := &keyPos{line: sp.Line, off: 1 << 61, raw: showValue(m[k]), defined: true}
						if was := pos[segs.key()]; was != nil {
							at.off = was.off
						}
						pos[segs.key()] = at
					}
				}
				continue
			}
			values[sp.Path] = v
			label = append(label, sp.Path+"="+showValue(v))
			if sp.Path == SweepNodes {
				if err := s.keepNodes(root, v); err != nil && setErr == nil {
					setErr = &Error{File: s.name, Line: sp.Line, Field: "sweep.nodes", Msg: err.Error()}
				}
				continue
			}
			if err := setPath(root, sp.Path, v); err != nil && setErr == nil {
				setErr = &Error{File: s.name, Line: sp.Line, Field: "sweep." + showKey(sp.Path), Msg: err.Error()}
			}
			if segs, err := splitSweepPath(sp.Path); err == nil {
				at := &keyPos{line: sp.Line, off: 1 << 61, raw: showValue(v), defined: true}
				if was := pos[segs.key()]; was != nil {
					at.off = was.off
				}
				pos[segs.key()] = at
			}
		}
		if setErr != nil {
			return nil, setErr // the path itself is wrong: every point would say so
		}
		c := &decoder{file: s.name, d: &doc{root: root, pos: pos}, env: s.env}
		ps := c.spec()
		ps.name, ps.File, ps.raw, ps.env = s.name, s.File, c.d, s.env
		if len(c.errs) > 0 {
			ps.readErrs = sortErrors(c.errs)
		}
		points = append(points, Point{Label: strings.Join(label, ", "), Values: values, Spec: ps})
		// Next combination.
		i := len(idx) - 1
		for ; i >= 0; i-- {
			idx[i]++
			if idx[i] < len(s.Sweep[i].Values) {
				break
			}
			idx[i] = 0
		}
		if i < 0 {
			return points, nil
		}
	}
}

// SweepNodes is the sweep path that varies how many of the spec's nodes
// the lab has.
const SweepNodes = "nodes"

// keepNodes keeps the first n nodes of the spec (as written) in root.
func (s *Spec) keepNodes(root map[string]any, v any) error {
	n, ok := v.(int64)
	if !ok || n < 1 || int(n) > len(s.Nodes) {
		return fmt.Errorf("nodes = %s: want a whole number from 1 to %d (the nodes the spec writes), to keep that many of them in the order written", showValue(v), len(s.Nodes))
	}
	nodes, _ := root["node"].(map[string]any)
	for _, dropped := range s.Nodes[n:] {
		delete(nodes, dropped.Name)
	}
	return nil
}

// PointError is what is wrong with one combination of a sweep.
type PointError struct {
	Label string // "run.users=30, link[1].rate=19.2kbit"
	Err   error
}

func (e *PointError) Error() string { return fmt.Sprintf("sweep point %s:\n%v", e.Label, e.Err) }
func (e *PointError) Unwrap() error { return e.Err }

// setPath sets a value in a decoded TOML tree, creating tables on the way.
func setPath(root map[string]any, pth string, v any) error {
	segs, err := splitSweepPath(pth)
	if err != nil {
		return err
	}
	var cur any = root
	for i, seg := range segs {
		last := i == len(segs)-1
		if n, ok := strings.CutPrefix(seg, idxMark); ok {
			arr, isArr := cur.([]any)
			k, _ := strconv.Atoi(n)
			if !isArr || k >= len(arr) {
				return fmt.Errorf("%s: there is no element %d", pth, k+1)
			}
			if last {
				arr[k] = v
				return nil
			}
			cur = arr[k]
			continue
		}
		m, isMap := cur.(map[string]any)
		if !isMap {
			return fmt.Errorf("%s: %s is not a table", pth, seg)
		}
		if last {
			m[seg] = v
			return nil
		}
		next, ok := m[seg]
		if !ok {
			if i+1 < len(segs) && strings.HasPrefix(segs[i+1], idxMark) {
				return fmt.Errorf("%s: there is no %s list", pth, seg)
			}
			next = map[string]any{}
			m[seg] = next
		}
		cur = next
	}
	return nil
}

func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = deepCopy(e)
		}
		return out
	}
	return v
}
