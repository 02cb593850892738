package check

// The dependency graph. Its nodes are the committed transactions (the
// first nTxn nodes) and two kinds of relay node that keep it small:
//
//   - a version node V(k, a) for each register version a that has
//     successors: its writer and its readers point to it, and it points
//     to the writers of the versions known to follow a. A writer's
//     W(a) → V(a) → W(b) is W(a) -ww-> W(b), a reader's R → V(a) → W(b) is
//     R -rw-> W(b), without an edge per (reader, successor) pair.
//   - a barrier node for real time: each transaction's completion points
//     to the barrier after it, barriers are chained in time, and the
//     barrier before each invocation points to it, so A ⇝ B through
//     barriers exactly when A completed before B was invoked: real-time
//     order in O(n) edges instead of O(n²).
//
// A path between two transactions through relay nodes is one dependency
// of the cycle it belongs to (see collapse).

type ekind uint8

const (
	kWW ekind = iota // write → a later write of the key (or → its version node)
	kWR              // write → a read of it
	kRW              // read → a later write of the key (or → the version node read)
	kPO              // process order
	kRT              // real time, through barrier nodes
	kVO              // version node → a later version's writer
)

var kindName = [...]string{kWW: "ww", kWR: "wr", kRW: "rw", kPO: "process", kRT: "realtime", kVO: "vo"}

// level is what an edge's truth rests on: the data alone, process order,
// a version order inferred from process order, real time, a version order
// inferred from real time. A cycle's level is its highest edge's; the
// classes of levels above plain carry -process or -realtime.
type level uint8

const (
	lvPlain level = iota
	lvProcess
	lvProcessInferred
	lvRealtime
	lvRealtimeInferred
	nLevels
)

var levelName = [...]string{"plain", "process", "process (inferred version order)", "real-time", "real-time (inferred version order)"}

func (l level) suffix() string {
	switch {
	case l >= lvRealtime:
		return RealtimeSuffix
	case l >= lvProcess:
		return ProcessSuffix
	}
	return ""
}

type edge struct {
	to    int32
	kind  ekind
	level level
	why   int32 // register: the version edge behind it; -1 otherwise
	key   int64
	val   int64 // list: the element the edge is about
}

type rawEdge struct {
	from int32
	edge
}

const (
	auxVersion = iota + 1
	auxBarrier
)

type graph struct {
	nTxn  int
	nodes int
	aux   []uint8 // kind of node nTxn+i
	raw   []rawEdge
	off   []int32 // adjacency: adj[off[n]:off[n+1]]
	adj   []edge
	from  []int32 // from[i] is the source of adj[i]
}

func (g *graph) addAux(kind uint8) int32 {
	g.aux = append(g.aux, kind)
	g.nodes++
	return int32(g.nodes - 1)
}

func (g *graph) add(from, to int32, kind ekind, lv level, key, val int64, why int32) {
	g.raw = append(g.raw, rawEdge{from, edge{to: to, kind: kind, level: lv, why: why, key: key, val: val}})
}

func (g *graph) isTxn(n int32) bool { return int(n) < g.nTxn }

// build sorts the edges by source (a counting sort, stable: edges keep the
// order they were added in).
func (g *graph) build() {
	g.off = make([]int32, g.nodes+1)
	for _, e := range g.raw {
		g.off[e.from+1]++
	}
	for i := 1; i <= g.nodes; i++ {
		g.off[i] += g.off[i-1]
	}
	g.adj = make([]edge, len(g.raw))
	g.from = make([]int32, len(g.raw))
	next := append([]int32(nil), g.off[:g.nodes]...)
	for _, e := range g.raw {
		i := next[e.from]
		next[e.from]++
		g.adj[i] = e.edge
		g.from[i] = e.from
	}
	g.raw = nil
}

// filter selects the edges a search may follow.
type filter struct {
	maxLevel level
	noWR     bool // G0: ww only
	noRW     bool // G0, G1c
}

func (f filter) ok(e *edge) bool {
	if e.level > f.maxLevel {
		return false
	}
	switch e.kind {
	case kWR:
		return !f.noWR
	case kRW:
		return !f.noRW
	}
	return true
}

// scc finds the strongly connected components among nodes (or every node
// when nodes is nil) over the edges f allows, with Tarjan's algorithm
// (iterative). comp[n] is n's component, -1 for nodes outside the set;
// components are numbered in the order Tarjan completes them, which is a
// reverse topological order of the condensation. Only components of two or
// more nodes are returned.
func (g *graph) scc(nodes []int32, f filter, comp []int32) [][]int32 {
	var s sccState
	s.g, s.f, s.comp = g, f, comp
	s.index = make(map[int32]int32)
	if nodes == nil {
		s.dense = make([]int32, g.nodes)
		s.lowD = make([]int32, g.nodes)
		for n := int32(0); n < int32(g.nodes); n++ {
			comp[n] = -2 // in the set, unvisited
		}
		for n := int32(0); n < int32(g.nodes); n++ {
			if comp[n] == -2 && s.dense[n] == 0 {
				s.visit(n)
			}
		}
	} else {
		s.low = make(map[int32]int32)
		for _, n := range nodes {
			comp[n] = -2
		}
		for _, n := range nodes {
			if _, seen := s.index[n]; !seen && comp[n] == -2 {
				s.visit(n)
			}
		}
	}
	return s.out
}

type sccState struct {
	g     *graph
	f     filter
	comp  []int32
	dense []int32 // index+1 per node, for the whole graph
	lowD  []int32
	index map[int32]int32 // for a subset
	low   map[int32]int32
	next  int32
	stack []int32
	ncomp int32
	out   [][]int32
}

func (s *sccState) idx(n int32) int32 {
	if s.dense != nil {
		return s.dense[n]
	}
	return s.index[n]
}

func (s *sccState) setIdx(n, v int32) {
	if s.dense != nil {
		s.dense[n] = v
		s.lowD[n] = v
		return
	}
	s.index[n] = v
	s.low[n] = v
}

func (s *sccState) getLow(n int32) int32 {
	if s.dense != nil {
		return s.lowD[n]
	}
	return s.low[n]
}

func (s *sccState) setLow(n, v int32) {
	if s.dense != nil {
		s.lowD[n] = v
	} else {
		s.low[n] = v
	}
}

// visit is Tarjan's strongconnect without recursion: frames hold the node
// and the next edge to look at. comp[n] == -3 marks "on the stack".
func (s *sccState) visit(root int32) {
	type frame struct {
		n int32
		e int32
	}
	g := s.g
	s.next++
	s.setIdx(root, s.next)
	s.stack = append(s.stack, root)
	s.comp[root] = -3
	frames := []frame{{root, g.off[root]}}
	for len(frames) > 0 {
		fr := &frames[len(frames)-1]
		n := fr.n
		if fr.e < g.off[n+1] {
			e := &g.adj[fr.e]
			fr.e++
			if !s.f.ok(e) {
				continue
			}
			m := e.to
			switch s.comp[m] {
			case -2: // in the set
				if s.idx(m) == 0 {
					s.next++
					s.setIdx(m, s.next)
					s.stack = append(s.stack, m)
					s.comp[m] = -3
					frames = append(frames, frame{m, g.off[m]})
				}
			case -3: // on the stack
				if v := s.idx(m); v < s.getLow(n) {
					s.setLow(n, v)
				}
			}
			continue
		}
		// n is done.
		frames = frames[:len(frames)-1]
		if len(frames) > 0 {
			p := frames[len(frames)-1].n
			if l := s.getLow(n); l < s.getLow(p) {
				s.setLow(p, l)
			}
		}
		if s.getLow(n) == s.idx(n) {
			var members []int32
			for {
				m := s.stack[len(s.stack)-1]
				s.stack = s.stack[:len(s.stack)-1]
				s.comp[m] = s.ncomp
				members = append(members, m)
				if m == n {
					break
				}
			}
			if len(members) > 1 {
				// Reverse: members in the order they were visited.
				for i, j := 0, len(members)-1; i < j; i, j = i+1, j-1 {
					members[i], members[j] = members[j], members[i]
				}
				s.out = append(s.out, members)
			}
			s.ncomp++
		}
	}
}
