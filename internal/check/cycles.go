package check

import (
	"fmt"
	"strings"
)

// Cycles. The graph is searched level by level (plain, then with process
// order, with process-inferred version orders, with real time, with
// real-time-inferred version orders). At each level Tarjan's algorithm
// finds the strongly connected components; a component that holds no
// edge of the level itself was reported at a lower one. In each new
// component the search looks for one cycle that uses an edge of the level,
// of the most severe class first:
//
//   - G0: only ww (and order) edges — exact: a component of the ww
//     subgraph holding an edge of the level has one;
//   - G1c: ww and wr — exact the same way;
//   - G-single: exactly one rw — for each rw edge, a shortest path back
//     over the other kinds;
//   - G-nonadjacent: two or more rw, no two adjacent — a search over
//     (node, last edge was rw, another rw seen);
//   - G2-item: any rw;
//
// and, when the bounded search (Options.SearchSteps) finds none of these,
// the shortest cycle through an edge of the level, classified by its
// edges. So each component gets one witness: its count is one anomaly. A
// milder class in the same component is not reported (the component's
// most severe class rules out every model the milder would). Process and
// real-time edges count as neither wr nor rw: a cycle that needs them is
// classed by its data edges with -process or -realtime appended.

// maxStates is the search's state per node: level edge used, last edge
// rw, another rw seen.
const maxStates = 8

// maxTries is how many cycles of a class the search compares, per
// component, to report the shortest.
const maxTries = 8

const (
	sLevel = 1 << iota
	sLastRW
	sExtraRW
)

type search struct {
	g        *graph
	stamp    []uint32 // per node*maxStates+state: the search that reached it
	cur      uint32
	prevKey  []int32 // the node*maxStates+state it was reached from
	prevEdge []int32 // by which edge (adj index); -1 at the start
	queue    []int32
	steps    int // edges followed in the current component
	limit    int
}

func newSearch(g *graph, limit int) *search {
	n := g.nodes * maxStates
	return &search{g: g, stamp: make([]uint32, n), prevKey: make([]int32, n), prevEdge: make([]int32, n), limit: limit}
}

// bfs finds a shortest walk from (src, s0) to (dst, a state accept
// allows), over the edges step allows (returning the state after the
// edge) that stay among the nodes in allows. It returns the walk's edges
// (adj indices) in order, or nil (none, or the step budget ran out).
func (s *search) bfs(src int32, s0 int, dst int32, accept func(int) bool,
	in func(int32) bool, step func(from int32, st int, e *edge) (int, bool)) []int32 {
	s.cur++
	if s.cur == 0 { // wrapped: clear the stamps
		clear(s.stamp)
		s.cur = 1
	}
	g := s.g
	k0 := src*maxStates + int32(s0)
	s.stamp[k0] = s.cur
	s.prevEdge[k0] = -1
	s.queue = append(s.queue[:0], k0)
	for h := 0; h < len(s.queue); h++ {
		key := s.queue[h]
		n, st := key/maxStates, int(key%maxStates)
		for i := g.off[n]; i < g.off[n+1]; i++ {
			s.steps++
			if s.steps > s.limit {
				return nil
			}
			e := &g.adj[i]
			if !in(e.to) {
				continue
			}
			ns, ok := step(n, st, e)
			if !ok {
				continue
			}
			k := e.to*maxStates + int32(ns)
			if s.stamp[k] == s.cur {
				continue
			}
			s.stamp[k] = s.cur
			s.prevKey[k] = key
			s.prevEdge[k] = i
			if e.to == dst && accept(ns) {
				return s.path(k)
			}
			s.queue = append(s.queue, k)
		}
	}
	return nil
}

// path rebuilds the edges that led to key.
func (s *search) path(key int32) []int32 {
	var rev []int32
	for s.prevEdge[key] >= 0 {
		rev = append(rev, s.prevEdge[key])
		key = s.prevKey[key]
	}
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	return rev
}

// collapsed is a cycle between transactions: its edges, each a path of
// raw edges from one transaction to the next.
type collapsed struct {
	txns  []int32 // txn nodes, in order
	edges [][]int32
	kinds []ekind
	level level
}

// collapse turns a cycle of raw edges into one between transactions; ok
// is false when a transaction repeats (the walk is not a simple cycle).
func (c *checker) collapse(cyc []int32) (collapsed, bool) {
	g := &c.g
	start := -1
	for i, e := range cyc {
		if g.isTxn(g.from[e]) {
			start = i
			break
		}
	}
	var out collapsed
	if start < 0 {
		return out, false
	}
	cyc = append(append([]int32(nil), cyc[start:]...), cyc[:start]...)
	seen := map[int32]bool{}
	var cur []int32
	for _, e := range cyc {
		from := g.from[e]
		if g.isTxn(from) {
			if seen[from] {
				return out, false
			}
			seen[from] = true
			out.txns = append(out.txns, from)
			cur = nil
		}
		cur = append(cur, e)
		if lv := g.adj[e].level; lv > out.level {
			out.level = lv
		}
		if g.isTxn(g.adj[e].to) {
			out.edges = append(out.edges, cur)
			out.kinds = append(out.kinds, g.adj[cur[0]].kind)
		}
	}
	return out, len(out.txns) >= 2 && len(out.edges) == len(out.txns)
}

// class names a collapsed cycle by its edges.
func (cy collapsed) class() string {
	nrw, wr, adjacent := 0, false, false
	for i, k := range cy.kinds {
		switch k {
		case kRW:
			nrw++
			if cy.kinds[(i+1)%len(cy.kinds)] == kRW {
				adjacent = true
			}
		case kWR:
			wr = true
		}
	}
	var base string
	switch {
	case nrw == 0 && wr:
		base = G1c
	case nrw == 0:
		base = G0
	case nrw == 1:
		base = GSingle
	case !adjacent:
		base = GNonadjacent
	default:
		base = G2Item
	}
	return base + cy.level.suffix()
}

// cycles searches each level's new strongly connected components.
func (c *checker) cycles() {
	g := &c.g
	var has [nLevels]bool
	for i := range g.adj {
		has[g.adj[i].level] = true
	}
	comp := make([]int32, g.nodes)
	sub := make([]int32, g.nodes)
	prev := make([]int32, g.nodes) // the component at the last level searched; -1: none
	for i := range sub {
		sub[i], prev[i] = -1, -1
	}
	prevSize := map[int32]int{}
	var srch *search
	for lv := lvPlain; lv < nLevels; lv++ {
		if !has[lv] {
			continue
		}
		if c.expired() {
			c.res.skip("the cycle search stopped before the %s level (and any after it): the time budget of %s ran out; %s", levelName[lv], c.opts.MaxDuration, modelsAt(lv))
			return
		}
		sccs := g.scc(nil, filter{maxLevel: lv}, comp)
		// A component with the same transactions as one at the level below
		// was reported there (it has no edge of this level inside).
		// Relay nodes do not count: a component can gain barrier nodes
		// and nothing else.
		fresh := sccs[:0:0]
		for _, s := range sccs {
			p, txns := int32(-1), 0
			same := true
			for _, n := range s {
				if !g.isTxn(n) {
					continue
				}
				if txns == 0 {
					p = prev[n]
				}
				txns++
				if prev[n] != p || p < 0 {
					same = false
					break
				}
			}
			if !same || prevSize[p] != txns {
				fresh = append(fresh, s)
			}
		}
		for si, s := range fresh {
			if c.expired() {
				for _, s2 := range fresh[si:] {
					c.unclassified(s2, lv)
				}
				c.res.skip("the time budget of %s ran out in the cycle search at the %s level: %d strongly connected components were not classified (each is counted as %q), and later levels were not searched; %s",
					c.opts.MaxDuration, levelName[lv], len(fresh)-si, Cycle+lv.suffix(), modelsAt(lv+1))
				return
			}
			if srch == nil {
				srch = newSearch(g, c.opts.SearchSteps)
			}
			srch.steps = 0
			c.classify(srch, s, comp, sub, lv)
		}
		if c.cut[lv] > 0 {
			c.res.skip("%d strongly connected components at the %s level (the largest of %d nodes): the search for their most severe cycles stopped after %d steps each (Options.SearchSteps); a milder-looking cycle was reported for each, and a G-single or G-nonadjacent one may be there",
				c.cut[lv], levelName[lv], c.cutMax[lv], c.opts.SearchSteps)
		}
		for i := range prev {
			prev[i] = -1
		}
		clear(prevSize)
		for _, s := range sccs {
			id := comp[s[0]]
			for _, n := range s {
				if g.isTxn(n) {
					prev[n] = id
					prevSize[id]++
				}
			}
		}
	}
}

// modelsAt says which verdicts a search stopped at level lv leaves open.
func modelsAt(lv level) string {
	if lv >= lvRealtime {
		return "strict-serializable is not established"
	}
	return "the verdicts of every model are not established"
}

// classify finds component s's witness at level lv (see the file comment).
func (c *checker) classify(srch *search, s []int32, comp, sub []int32, lv level) {
	g := &c.g
	id := comp[s[0]]
	inS := func(n int32) bool { return comp[n] == id }
	levelOK := func(e *edge) bool { return lv == lvPlain || e.level == lv }
	s0 := func(e *edge) int {
		if levelOK(e) {
			return sLevel
		}
		return 0
	}
	acceptLevel := func(st int) bool { return st&sLevel != 0 }

	// G0, then G1c: a component of the subgraph with an edge of the level.
	for _, f := range []filter{{maxLevel: lv, noWR: true, noRW: true}, {maxLevel: lv, noRW: true}} {
		subs := g.scc(s, f, sub)
		found := false
		for _, ss := range subs {
			sid := sub[ss[0]]
			for _, u := range ss {
				for i := g.off[u]; i < g.off[u+1] && !found; i++ {
					e := &g.adj[i]
					if !f.ok(e) || sub[e.to] != sid || !levelOK(e) {
						continue
					}
					f := f
					p := srch.bfs(e.to, 0, u, func(int) bool { return true },
						func(n int32) bool { return sub[n] == sid },
						func(_ int32, _ int, e *edge) (int, bool) { return 0, f.ok(e) })
					if p != nil && c.report(append([]int32{i}, p...), "") {
						found = true
					}
				}
				if found {
					break
				}
			}
			if found {
				break
			}
		}
		if found {
			for _, n := range s {
				sub[n] = -1
			}
			return
		}
		if f.noWR {
			for _, n := range s {
				sub[n] = -1
			}
		}
	}
	// sub now numbers the components of the graph without rw edges
	// (reverse topological order): x reaches u over it only if sub[x] >=
	// sub[u].
	defer func() {
		for _, n := range s {
			sub[n] = -1
		}
	}()
	var rws []int32
	for _, u := range s {
		if !g.isTxn(u) {
			continue
		}
		for i := g.off[u]; i < g.off[u+1]; i++ {
			e := &g.adj[i]
			if e.kind == kRW && e.level <= lv && inS(e.to) {
				rws = append(rws, i)
			}
		}
	}
	txnNode := func(n int32) bool { return g.isTxn(n) }
	// shortest tries the rw edges in turn (find returns a walk back from
	// the edge's head, or nil) and reports the shortest simple cycle among
	// the first few found.
	shortest := func(find func(i int32) []int32) bool {
		var best collapsed
		found := 0
		for _, i := range rws {
			if srch.steps > srch.limit {
				break
			}
			p := find(i)
			if p == nil {
				continue
			}
			if cy, ok := c.collapse(append([]int32{i}, p...)); ok {
				if found == 0 || len(cy.txns) < len(best.txns) {
					best = cy
				}
				found++
				if len(best.txns) == 2 || found >= maxTries {
					break
				}
			}
		}
		if found > 0 {
			c.emit(best, "")
		}
		return found > 0
	}
	// G-single.
	if shortest(func(i int32) []int32 {
		e := &g.adj[i]
		u := g.from[i]
		if sub[e.to] < sub[u] { // e.to cannot reach u without rw edges
			return nil
		}
		return srch.bfs(e.to, s0(e), u, acceptLevel, inS, func(_ int32, st int, e *edge) (int, bool) {
			if e.kind == kRW || e.level > lv {
				return 0, false
			}
			if levelOK(e) {
				st |= sLevel
			}
			return st, true
		})
	}) {
		return
	}
	// G-nonadjacent.
	if shortest(func(i int32) []int32 {
		e := &g.adj[i]
		return srch.bfs(e.to, s0(e)|sLastRW, g.from[i], func(st int) bool { return st&sLevel != 0 && st&sExtraRW != 0 && st&sLastRW == 0 }, inS,
			func(from int32, st int, e *edge) (int, bool) {
				if e.level > lv {
					return 0, false
				}
				if levelOK(e) {
					st |= sLevel
				}
				if txnNode(from) {
					if e.kind == kRW {
						if st&sLastRW != 0 {
							return 0, false
						}
						st |= sLastRW | sExtraRW
					} else {
						st &^= sLastRW
					}
				}
				return st, true
			})
	}) {
		return
	}
	// G2-item.
	if shortest(func(i int32) []int32 {
		e := &g.adj[i]
		return srch.bfs(e.to, s0(e), g.from[i], acceptLevel, inS, func(_ int32, st int, e *edge) (int, bool) {
			if e.level > lv {
				return 0, false
			}
			if levelOK(e) {
				st |= sLevel
			}
			return st, true
		})
	}) {
		return
	}
	// The shortest cycle through an edge of the level, whatever it is.
	note := ""
	if srch.steps > srch.limit {
		note = fmt.Sprintf("the search for a G-single, G-nonadjacent or G2-item cycle in this component of %d nodes stopped after %d steps (Options.SearchSteps); this is the first cycle found through an edge of the level", len(s), srch.limit)
		c.cut[lv]++
		c.cutMax[lv] = max(c.cutMax[lv], len(s))
	}
	srch.limit, srch.steps = int(^uint(0)>>1), 0
	defer func() { srch.limit = c.opts.SearchSteps }()
	for _, u := range s {
		for i := g.off[u]; i < g.off[u+1]; i++ {
			e := &g.adj[i]
			if e.level > lv || !inS(e.to) || !levelOK(e) {
				continue
			}
			p := srch.bfs(e.to, 0, u, func(int) bool { return true }, inS, func(_ int32, _ int, e *edge) (int, bool) { return 0, e.level <= lv })
			if p != nil && c.report(append([]int32{i}, p...), note) {
				return
			}
		}
	}
	c.unclassified(s, lv)
}

// unclassified counts a component whose cycles were not found.
func (c *checker) unclassified(s []int32, lv level) {
	var names []string
	var txns []int32
	for _, n := range s {
		if c.g.isTxn(n) {
			txns = append(txns, c.txn[n])
			if len(names) < 8 {
				names = append(names, c.name(c.txn[n]))
			}
		}
	}
	if len(txns) > len(names) {
		names = append(names, "…")
	}
	w := Witness{Class: Cycle + lv.suffix(),
		Summary: fmt.Sprintf("a strongly connected component of %d transactions (%s) whose cycles were not classified", len(txns), strings.Join(names, ", ")),
		Details: []string{"the transactions depend on one another in a cycle (the component is strongly connected at this level), but the search for a witness cycle did not finish"}}
	if len(txns) > 8 {
		txns = txns[:8]
	}
	w.Txns = c.txnsW(txns...)
	c.res.add(c.opts.MaxWitnesses, w)
}

// report adds the witness of a cycle of raw edges; false when the walk is
// not a simple cycle of two or more transactions.
func (c *checker) report(cyc []int32, note string) bool {
	cy, ok := c.collapse(cyc)
	if ok {
		c.emit(cy, note)
	}
	return ok
}

// emit adds the witness of a cycle.
func (c *checker) emit(cy collapsed, note string) {
	// Start at the earliest transaction (by index), for a stable reading.
	first := 0
	for i, t := range cy.txns {
		if c.ops[c.txn[t]].Index < c.ops[c.txn[cy.txns[first]]].Index {
			first = i
		}
	}
	cy.txns = append(cy.txns[first:], cy.txns[:first]...)
	cy.edges = append(cy.edges[first:], cy.edges[:first]...)
	cy.kinds = append(cy.kinds[first:], cy.kinds[:first]...)
	class := cy.class()
	w := Witness{Class: class}
	var chain []string
	for i, t := range cy.txns {
		a := c.txn[t]
		b := c.txn[cy.txns[(i+1)%len(cy.txns)]]
		w.Txns = append(w.Txns, c.txnW(a))
		typ, why := c.why(cy.edges[i], a, b)
		w.Edges = append(w.Edges, Edge{From: c.ops[a].Index, To: c.ops[b].Index, Type: typ, Why: why})
		chain = append(chain, fmt.Sprintf("%s -%s->", c.name(a), typ))
	}
	chain = append(chain, c.name(c.txn[cy.txns[0]]))
	w.Summary = fmt.Sprintf("a cycle of %d transactions: %s", len(cy.txns), strings.Join(chain, " "))
	if note != "" {
		w.Details = append(w.Details, note)
	}
	c.res.add(c.opts.MaxWitnesses, w)
}

// why explains one collapsed edge (raw edges from op a's node to op b's).
func (c *checker) why(raw []int32, a, b int32) (typ, why string) {
	g := &c.g
	e := &g.adj[raw[0]]
	typ = kindName[e.kind]
	switch e.kind {
	case kPO:
		return typ, fmt.Sprintf("process %d ran %s, then %s", c.ops[a].Process, c.name(a), c.name(b))
	case kRT:
		return typ, fmt.Sprintf("%s completed at %s, before %s began at %s", c.name(a), c.at(c.ops[a].CompleteNs), c.name(b), c.at(c.ops[b].InvokeNs))
	}
	if c.kind[e.key] == kindList {
		return typ, c.listWhy(e, a, b)
	}
	ve := e.why
	if ve < 0 && len(raw) > 1 {
		ve = g.adj[raw[1]].why
	}
	return typ, c.registerWhy(e.kind, e.key, e.val, a, b, ve)
}
