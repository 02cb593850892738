package check

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"replab/internal/history"
)

// Registers. A read of a register shows one version and nothing of the
// order, so the version order is inferred, and only what is certain is:
//
//   - plain (true whatever the model): the initial nil precedes every
//     written value; a transaction that read a and then wrote b installed
//     b after a (its write follows its read);
//   - under process order (strong session models), versions follow the
//     order in which one process touched them: a process that read or
//     wrote a and later read or wrote b saw a first, so a precedes b;
//   - under real time (strict serializability), a precedes b when some
//     transaction that read or wrote a completed before some transaction
//     that read or wrote b began.
//
// A cycle that needs the process- or real-time-inferred orders is
// reported as a -process or -realtime class, like one that needs process
// or real-time edges. What is not inferred: the order of two blind writes
// no read separates, and any order from the timing of writes and reads
// alone when process and real time are not assumed. A transaction's writes
// other than its last to a key are not versions (reading one is G1b).
//
// A version has a relay node when it has successors: its writer points to
// it (ww), its readers point to it (rw), it points to each successor's
// writer. A reader that itself writes the key instead points straight to
// the successors' writers other than itself, so its read and its own
// later write make no cycle of one transaction.

type version struct {
	key     int64
	val     int64
	isNil   bool
	writer  int32   // op; -1 for nil
	readers []int32 // ok ops whose external read returned it
	node    int32   // relay node; -1 when none
	succ    []int32 // version edges out of it
	plainIn bool    // a plain edge other than from nil leads to it
}

type vreason uint8

const (
	vrInitial vreason = iota
	vrWFR
	vrProcess
	vrRealtime
)

// versionEdge is an inferred "from precedes to" with its evidence: ops x
// and y (the same op for vrWFR).
type versionEdge struct {
	from, to int32
	level    level
	reason   vreason
	x, y     int32
}

type regKey struct {
	key  int64
	nilv int32   // the nil version, when some transaction read nil; -1
	vers []int32 // the written versions, in history order
}

// maxRealtimeVersionEdges bounds the real-time inference (see
// realtimeOrder: typically a few edges per version).
const maxRealtimeVersionEdges = 8_000_000

func (c *checker) analyseRegisters() {
	byKey := map[int64]*regKey{}
	vid := map[kv]int32{}
	get := func(k int64) *regKey {
		rk := byKey[k]
		if rk == nil {
			rk = &regKey{key: k, nilv: -1}
			byKey[k] = rk
		}
		return rk
	}
	// Versions: the last write of each committed transaction.
	for i := 0; i < c.n; i++ {
		if !c.st[i].committed() {
			continue
		}
		for x := c.accOff[i]; x < c.accOff[i+1]; x++ {
			a := &c.acc[x]
			if a.last < 0 || c.kind[a.key] != kindRegister {
				continue
			}
			rk := get(a.key)
			v := c.ops[i].Value[a.last].Value
			id := int32(len(c.vers))
			c.vers = append(c.vers, version{key: a.key, val: v, writer: int32(i), node: -1})
			rk.vers = append(rk.vers, id)
			vid[kv{a.key, v}] = id
			a.wv = id
		}
	}
	// Reads.
	for i := 0; i < c.n; i++ {
		if c.st[i] != stOK {
			continue
		}
		for x := c.accOff[i]; x < c.accOff[i+1]; x++ {
			a := &c.acc[x]
			if a.read < 0 || c.kind[a.key] != kindRegister {
				continue
			}
			c.registerRead(int32(i), a, get(a.key), vid)
		}
	}
	keys := make([]int64, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	seen := map[[2]int32]bool{}
	for _, k := range keys {
		rk := byKey[k]
		c.regs = append(c.regs, rk)
		c.plainOrder(rk, seen)
	}
	c.processOrder(seen)
	budget := maxRealtimeVersionEdges
	for _, rk := range c.regs {
		if !c.realtimeOrder(rk, seen, &budget) {
			c.res.skip("real-time version orders of register key %d and the keys after it were not inferred: more than %d inferred edges", rk.key, maxRealtimeVersionEdges)
			break
		}
	}
	for _, rk := range c.regs {
		c.registerAnomalies(rk)
		c.registerEdges(rk)
	}
}

// registerRead attributes op i's external read of a register to a version,
// or reports why it cannot be one.
func (c *checker) registerRead(i int32, a *access, rk *regKey, vid map[kv]int32) {
	m := c.ops[i].Value[a.read]
	k := a.key
	if m.Got != history.GotValue { // null: the initial nil
		if rk.nilv < 0 {
			rk.nilv = int32(len(c.vers))
			c.vers = append(c.vers, version{key: k, isNil: true, writer: -1, node: -1})
		}
		a.rv = rk.nilv
		c.vers[rk.nilv].readers = append(c.vers[rk.nilv].readers, i)
		return
	}
	w, ok := c.writer[kv{k, m.Value}]
	switch {
	case !ok:
		c.res.add(c.opts.MaxWitnesses, Witness{Class: GarbageRead,
			Summary: fmt.Sprintf("%s read %d from key %d, which no operation wrote", c.name(i), m.Value, k),
			Txns:    c.txnsW(i),
			Details: []string{fmt.Sprintf("%s read key %d = %d; no operation of the history wrote %d to key %d", c.name(i), k, m.Value, m.Value, k)}})
	case c.st[w.op] == stSkipped:
	case c.st[w.op] == stFail:
		c.res.add(c.opts.MaxWitnesses, Witness{Class: G1a,
			Summary: fmt.Sprintf("%s read %d from key %d, written by %s, which failed", c.name(i), m.Value, k, c.name(w.op)),
			Txns:    c.txnsW(i, w.op),
			Details: []string{fmt.Sprintf("%s read key %d = %d, which %s wrote; %s failed (aborted), so no committed transaction should see it",
				c.name(i), k, m.Value, c.name(w.op), c.name(w.op))}})
		if a.last >= 0 {
			c.res.add(c.opts.MaxWitnesses, Witness{Class: DirtyUpdate,
				Summary: fmt.Sprintf("%s wrote key %d over %s's write, which failed", c.name(i), k, c.name(w.op)),
				Txns:    c.txnsW(w.op, i),
				Details: []string{fmt.Sprintf("%s read key %d = %d, written by %s, which failed, then wrote %d to key %d and committed: a committed version follows an aborted one",
					c.name(i), k, m.Value, c.name(w.op), c.ops[i].Value[a.last].Value, k)}})
		}
	default:
		if wa := c.accessOf(int(w.op), k); wa != nil && wa.last != w.mop {
			later := c.ops[w.op].Value[wa.last].Value
			c.res.add(c.opts.MaxWitnesses, Witness{Class: G1b,
				Summary: fmt.Sprintf("%s read an intermediate write of %s to key %d", c.name(i), c.name(w.op), k),
				Txns:    c.txnsW(i, w.op),
				Details: []string{fmt.Sprintf("%s read key %d = %d, which %s wrote before writing %d to it: %s saw %s before it was complete",
					c.name(i), k, m.Value, c.name(w.op), later, c.name(i), c.name(w.op))}})
			return
		}
		id := vid[kv{k, m.Value}]
		a.rv = id
		c.vers[id].readers = append(c.vers[id].readers, i)
	}
}

func (c *checker) addVEdge(seen map[[2]int32]bool, from, to int32, lv level, why vreason, x, y int32) bool {
	if from == to || seen[[2]int32{from, to}] {
		return false
	}
	seen[[2]int32{from, to}] = true
	id := int32(len(c.vedge))
	c.vedge = append(c.vedge, versionEdge{from: from, to: to, level: lv, reason: why, x: x, y: y})
	c.vers[from].succ = append(c.vers[from].succ, id)
	return true
}

// plainOrder adds what holds under every model: a read-then-write
// transaction orders the two versions, and nil precedes the versions
// nothing else precedes.
func (c *checker) plainOrder(rk *regKey, seen map[[2]int32]bool) {
	for _, v := range rk.vers {
		w := c.vers[v].writer
		if c.st[w] != stOK {
			continue
		}
		a := c.accessOf(int(w), rk.key)
		if a.rv >= 0 && !c.vers[a.rv].isNil {
			c.addVEdge(seen, a.rv, v, lvPlain, vrWFR, w, w)
			c.vers[v].plainIn = true
		}
	}
	if rk.nilv < 0 {
		return
	}
	for _, v := range rk.vers {
		if !c.vers[v].plainIn {
			c.addVEdge(seen, rk.nilv, v, lvPlain, vrInitial, -1, -1)
		}
	}
}

// processOrder adds the orders one process's successive transactions
// imply: the version it touched (read or wrote) before precedes the one
// it touched after. Only ok transactions order what follows them (an info
// one may commit later).
func (c *checker) processOrder(seen map[[2]int32]bool) {
	type touch struct{ op, v int32 }
	ids, byProc := c.processes()
	for _, p := range ids {
		last := map[int64]touch{}
		for _, i := range byProc[p] {
			if !c.st[i].committed() {
				continue
			}
			for x := c.accOff[i]; x < c.accOff[i+1]; x++ {
				a := &c.acc[x]
				if c.kind[a.key] != kindRegister {
					continue
				}
				for _, v := range [2]int32{a.rv, a.wv} {
					if v < 0 || c.vers[v].isNil {
						continue
					}
					if l, ok := last[a.key]; ok && l.op != i && l.v != v {
						c.addVEdge(seen, l.v, v, lvProcessInferred, vrProcess, l.op, i)
					}
					if c.st[i] == stOK {
						last[a.key] = touch{i, v}
					}
				}
			}
		}
	}
}

// realtimeOrder adds the real-time orders of rk's versions. A version's
// cluster is its writer and readers; a precedes b when some member of a's
// cluster completed before some member of b's began: when minC(a) <
// maxI(b), where minC is the earliest completion and maxI the latest
// invocation among the members. It adds only the edges that are not
// implied by two others (a → c → b), which are a few per version when
// concurrency is bounded: the direct predecessors of b are clusters all in
// flight at one time. Such an order is cyclic exactly when two clusters
// each precede the other (the one with the earliest completion in a cycle
// and its predecessor do); both edges of such a pair are added, so the
// cycle is in the graph. It returns false when the budget ran out.
func (c *checker) realtimeOrder(rk *regKey, seen map[[2]int32]bool, budget *int) bool {
	type cluster struct {
		v      int32
		minC   int64
		maxI   int64
		cx, iy int32 // the members that give minC and maxI
	}
	cl := make([]cluster, 0, len(rk.vers))
	for _, v := range rk.vers {
		ver := &c.vers[v]
		k := cluster{v: v, minC: math.MaxInt64, maxI: math.MinInt64, cx: -1, iy: -1}
		member := func(o int32) {
			op := &c.ops[o]
			comp := op.CompleteNs
			if c.st[o] != stOK {
				comp = math.MaxInt64 // an info writer: it may commit any time
			}
			if comp < k.minC {
				k.minC, k.cx = comp, o
			}
			if op.InvokeNs > k.maxI {
				k.maxI, k.iy = op.InvokeNs, o
			}
		}
		member(ver.writer)
		for _, r := range ver.readers {
			member(r)
		}
		cl = append(cl, k)
	}
	if len(cl) < 2 {
		return true
	}
	sort.SliceStable(cl, func(a, b int) bool { return cl[a].minC < cl[b].minC })
	// top[q] holds the three largest maxI among cl[:q] (cluster indices,
	// -1 for none).
	top := make([][3]int32, len(cl)+1)
	top[0] = [3]int32{-1, -1, -1}
	for q := 1; q <= len(cl); q++ {
		t := top[q-1]
		x := int32(q - 1)
		for j := 0; j < 3; j++ {
			if t[j] < 0 || cl[x].maxI > cl[t[j]].maxI {
				x, t[j] = t[j], x
				if x < 0 {
					break
				}
			}
		}
		top[q] = t
	}
	add := func(a, b int) bool {
		if c.addVEdge(seen, cl[a].v, cl[b].v, lvRealtimeInferred, vrRealtime, cl[a].cx, cl[b].iy) {
			*budget--
		}
		return *budget > 0
	}
	for b := range cl {
		q := sort.Search(len(cl), func(i int) bool { return cl[i].minC >= cl[b].maxI })
		var id [2]int32 = [2]int32{-1, -1}
		n := 0
		for _, t := range top[q] {
			if t >= 0 && int(t) != b && n < 2 {
				id[n] = t
				n++
			}
		}
		if n == 0 {
			continue
		}
		m1 := cl[id[0]].maxI
		m2 := int64(math.MinInt64)
		if n == 2 {
			m2 = cl[id[1]].maxI
		}
		if m1 > cl[b].minC { // b and id[0] precede each other
			if !add(int(id[0]), b) || !add(b, int(id[0])) {
				return false
			}
		}
		lo := sort.Search(q, func(i int) bool { return cl[i].minC >= m2 })
		for a := lo; a < q; a++ {
			if a == b {
				continue
			}
			thr := m1
			if int32(a) == id[0] {
				thr = m2
			}
			if cl[a].minC >= thr && !add(a, b) {
				return false
			}
		}
	}
	return true
}

// registerAnomalies finds lost updates: two committed transactions that
// read the same version of a key and both wrote it.
func (c *checker) registerAnomalies(rk *regKey) {
	vs := rk.vers
	if rk.nilv >= 0 {
		vs = append([]int32{rk.nilv}, vs...)
	}
	for _, v := range vs {
		var ts []int32
		for _, r := range c.vers[v].readers {
			if a := c.accessOf(int(r), rk.key); a.wv >= 0 {
				ts = append(ts, r)
			}
		}
		if len(ts) < 2 {
			continue
		}
		ver := &c.vers[v]
		d := []string{fmt.Sprintf("%s and %s both read key %d = %s and both wrote it (%d and %d): each write was made without seeing the other",
			c.name(ts[0]), c.name(ts[1]), rk.key, regText(ver.val, ver.isNil),
			c.vers[c.accessOf(int(ts[0]), rk.key).wv].val, c.vers[c.accessOf(int(ts[1]), rk.key).wv].val)}
		if len(ts) > 2 {
			d = append(d, fmt.Sprintf("%d transactions in all read that version of key %d and wrote it", len(ts), rk.key))
		}
		c.res.add(c.opts.MaxWitnesses, Witness{Class: LostUpdate,
			Summary: fmt.Sprintf("%d transactions read the same version of key %d and wrote it", len(ts), rk.key),
			Txns:    c.txnsW(ts[:2]...), Details: d})
	}
}

// registerEdges adds rk's wr edges, and its ww and rw edges through the
// versions' relay nodes.
func (c *checker) registerEdges(rk *regKey) {
	k := rk.key
	vs := rk.vers
	if rk.nilv >= 0 {
		vs = append([]int32{rk.nilv}, vs...)
	}
	for _, v := range vs {
		ver := &c.vers[v]
		if !ver.isNil {
			for _, r := range ver.readers {
				if r != ver.writer {
					c.g.add(c.node[ver.writer], c.node[r], kWR, lvPlain, k, ver.val, -1)
				}
			}
		}
		if len(ver.succ) == 0 {
			continue
		}
		ver.node = c.g.addAux(auxVersion)
		if !ver.isNil {
			c.g.add(c.node[ver.writer], ver.node, kWW, lvPlain, k, ver.val, -1)
		}
		for _, r := range ver.readers {
			if c.accessOf(int(r), k).wv < 0 {
				c.g.add(c.node[r], ver.node, kRW, lvPlain, k, ver.val, -1)
				continue
			}
			for _, e := range ver.succ {
				ve := &c.vedge[e]
				if w := c.vers[ve.to].writer; w != r {
					c.g.add(c.node[r], c.node[w], kRW, ve.level, k, ver.val, e)
				}
			}
		}
		for _, e := range ver.succ {
			ve := &c.vedge[e]
			c.g.add(ver.node, c.node[c.vers[ve.to].writer], kVO, ve.level, k, c.vers[ve.to].val, e)
		}
	}
}

// versionWhy says why version edge e holds.
func (c *checker) versionWhy(e int32) string {
	ve := &c.vedge[e]
	a, b := &c.vers[ve.from], &c.vers[ve.to]
	did := func(o int32, v *version) string {
		if o == v.writer {
			return fmt.Sprintf("wrote %d", v.val)
		}
		return "read " + regText(v.val, v.isNil)
	}
	switch ve.reason {
	case vrInitial:
		return "every written value follows the initial nil"
	case vrWFR:
		return fmt.Sprintf("%s read %s then wrote %d", c.name(ve.x), regText(a.val, a.isNil), b.val)
	case vrProcess:
		return fmt.Sprintf("process %d ran %s (which %s) before %s (which %s)",
			c.ops[ve.x].Process, c.name(ve.x), did(ve.x, a), c.name(ve.y), did(ve.y, b))
	}
	return fmt.Sprintf("%s (which %s) completed at %s, before %s (which %s) began at %s",
		c.name(ve.x), did(ve.x, a), c.at(c.ops[ve.x].CompleteNs), c.name(ve.y), did(ve.y, b), c.at(c.ops[ve.y].InvokeNs))
}

// registerWhy explains a register edge from op a to op b; e is the edge
// out of a (into a relay node, for ww and rw through one) and ve the
// version edge behind it (-1 for wr).
func (c *checker) registerWhy(kind ekind, key, val int64, a, b int32, ve int32) string {
	switch kind {
	case kWR:
		return fmt.Sprintf("%s read key %d = %d, which %s wrote", c.name(b), key, val, c.name(a))
	case kWW:
		v := &c.vedge[ve]
		return fmt.Sprintf("%s wrote key %d = %d, %s wrote %d, a later version: %s",
			c.name(a), key, c.vers[v.from].val, c.name(b), c.vers[v.to].val, c.versionWhy(ve))
	}
	v := &c.vedge[ve]
	from := &c.vers[v.from]
	return fmt.Sprintf("%s read key %d = %s, %s wrote %d, a later version: %s",
		c.name(a), key, regText(from.val, from.isNil), c.name(b), c.vers[v.to].val, c.versionWhy(ve))
}
