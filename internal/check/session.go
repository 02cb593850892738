package check

import (
	"fmt"
	"math"
	"sort"

	"replab/internal/history"
)

// Session guarantees (Terry et al. 1994), per process, in terms of each
// key's recovered version order and the process's order of transactions
// (by invocation; only ok transactions count, and only transactions
// before the one checked, not operations within it):
//
//   - read-your-writes: a read of a key reflects every append (write) the
//     process made to it before: for a list, the read contains the
//     process's earlier elements; for a register, it does not return a
//     version known to precede the process's last write (nil included).
//   - monotonic reads: a read of a key is not older than the process's
//     earlier reads of it: a list read is not shorter than an earlier one
//     (the reads are prefixes of one order); a register read does not
//     return a version known to precede an earlier read.
//   - monotonic writes: the process's appends to a key take their places in
//     the order in process order: an element it appended later is not
//     placed before (or without) one it appended earlier; a register write
//     is not known to precede the process's earlier write.
//   - writes-follow-reads: a write is ordered after what the process read
//     before it. For lists, across keys: when a transaction sees the
//     process's append to key k2, its read of any key k1 the process read
//     before that append is at least as long as the process's read was.
//     (For one list key this is implied by the reads being prefixes of one
//     order.) For registers: a write is not known to precede a version the
//     process read before.
//
// "Known to precede" for registers is the plain order only (nil first, a
// transaction's read before its write), followed transitively; an order
// inferred from the process itself would make these checks circular.

func (c *checker) sessions() {
	ids, byProc := c.processes()
	c.listSessions(ids, byProc)
	c.registerSessions(ids, byProc)
}

func (c *checker) sessionWitness(class, summary string, d string, ops ...int32) {
	c.res.add(c.opts.MaxWitnesses, Witness{Class: class, Summary: summary, Txns: c.txnsW(ops...), Details: []string{d}})
}

// extList returns op i's external read of list key k when it is usable
// (not left out for duplicates or an incompatible order).
func (c *checker) extList(i int32, a *access) ([]int64, bool) {
	if a.read < 0 || c.kind[a.key] != kindList {
		return nil, false
	}
	m := c.ops[i].Value[a.read]
	if m.Got != history.GotList {
		return nil, false
	}
	lk := c.listKey(a.key)
	if _, bad := lk.bad[ref{i, a.read}]; bad {
		return nil, false
	}
	return m.List, true
}

// posOf is an element's place in its key's order; MaxInt32 when it has
// none (no read showed it).
func (c *checker) posOf(k, v int64) int32 {
	if w, ok := c.writer[kv{k, v}]; ok && w.pos >= 0 {
		return w.pos
	}
	return math.MaxInt32
}

// readMark is one process's longest read of a key up to a point in its
// order.
type readMark struct {
	at  int   // the transaction's position in the process's order
	len int   // the longest read so far
	op  int32 // the transaction that read it
}

func (c *checker) listSessions(ids []int, byProc map[int][]int32) {
	type state struct {
		maxRead   int
		maxReadOp int32
		maxReadL  []int64
		hasOwn    bool
		ownPos    int32 // the latest place of the process's elements (MaxInt32: one has none)
		ownEl     int64
		ownOp     int32
	}
	// marks[p][k]: where process p's reads of k grew, for writes-follow-reads.
	marks := map[int]map[int64][]readMark{}
	procPos := make(map[int32]int, c.n)
	for _, p := range ids {
		sts := map[int64]*state{}
		marks[p] = map[int64][]readMark{}
		for at, i := range byProc[p] {
			procPos[i] = at
			if c.st[i] != stOK {
				continue
			}
			acc := c.accesses(int(i))
			for x := range acc {
				a := &acc[x]
				if c.kind[a.key] != kindList {
					continue
				}
				s := sts[a.key]
				if s == nil {
					continue
				}
				k := a.key
				if l, ok := c.extList(i, a); ok {
					if s.hasOwn && s.ownPos >= int32(len(l)) {
						c.sessionWitness(ReadYourWrites,
							fmt.Sprintf("process %d: %s did not see %s's append to key %d", c.ops[i].Process, c.name(i), c.name(s.ownOp), k),
							fmt.Sprintf("process %d: %s appended %d to key %d, then %s read key %d as %s, without it",
								c.ops[i].Process, c.name(s.ownOp), s.ownEl, k, c.name(i), k, history.ListText(l)),
							s.ownOp, i)
					}
					if len(l) < s.maxRead {
						c.sessionWitness(MonotonicReads,
							fmt.Sprintf("process %d: %s read an older version of key %d than %s", c.ops[i].Process, c.name(i), k, c.name(s.maxReadOp)),
							fmt.Sprintf("process %d: %s read key %d as %s, then %s read it as %s, an older version",
								c.ops[i].Process, c.name(s.maxReadOp), k, history.ListText(s.maxReadL), c.name(i), history.ListText(l)),
							s.maxReadOp, i)
					}
				}
				if a.first >= 0 && s.hasOwn {
					e := c.ops[i].Value[a.first].Value
					if pos := c.posOf(k, e); pos != math.MaxInt32 && s.ownPos > pos {
						lk := c.listKey(k)
						where := fmt.Sprintf("no read shows %d", s.ownEl)
						if s.ownPos != math.MaxInt32 {
							where = fmt.Sprintf("%d comes after it", s.ownEl)
						}
						c.sessionWitness(MonotonicWrites,
							fmt.Sprintf("process %d: %s's append to key %d is ordered before %s's", c.ops[i].Process, c.name(i), k, c.name(s.ownOp)),
							fmt.Sprintf("process %d: %s appended %d to key %d, then %s appended %d; key %d's order %s (read by %s) has %d, but %s",
								c.ops[i].Process, c.name(s.ownOp), s.ownEl, k, c.name(i), e, k, history.ListText(lk.order), c.name(lk.from.op), e, where),
							s.ownOp, i)
					}
				}
			}
			// Then what i adds to the process's state.
			for x := range acc {
				a := &acc[x]
				if c.kind[a.key] != kindList {
					continue
				}
				s := sts[a.key]
				if s == nil {
					s = &state{}
					sts[a.key] = s
				}
				if l, ok := c.extList(i, a); ok && (len(l) > s.maxRead || s.maxReadL == nil) {
					s.maxRead, s.maxReadOp, s.maxReadL = len(l), i, l
					marks[p][a.key] = append(marks[p][a.key], readMark{at: at, len: len(l), op: i})
				}
				if a.first >= 0 {
					for j := a.first; j <= a.last; j++ {
						m := c.ops[i].Value[j]
						if m.Key != a.key || m.Fn != history.FnAppend {
							continue
						}
						if pos := c.posOf(a.key, m.Value); !s.hasOwn || pos >= s.ownPos {
							s.hasOwn, s.ownPos, s.ownEl, s.ownOp = true, pos, m.Value, i
						}
					}
				}
			}
		}
	}
	c.writesFollowReads(marks, procPos)
}

// writesFollowReads checks, for each transaction that read two or more
// list keys, that seeing a process's append to one key means seeing, in
// the other keys, at least what that process had read before the append.
func (c *checker) writesFollowReads(marks map[int]map[int64][]readMark, procPos map[int32]int) {
	type latest struct {
		proc int
		w    int32 // the process's transaction with the latest position in the read
	}
	var lat []latest
	for i := 0; i < c.n; i++ {
		if c.st[i] != stOK {
			continue
		}
		acc := c.accesses(i)
		nreads := 0
		for x := range acc {
			if _, ok := c.extList(int32(i), &acc[x]); ok {
				nreads++
			}
		}
		if nreads < 2 {
			continue
		}
		for x := range acc {
			l2, ok := c.extList(int32(i), &acc[x])
			if !ok {
				continue
			}
			k2 := acc[x].key
			wop := c.listKey(k2).wop
			lat = lat[:0]
			for pos := range l2 {
				w := wop[pos]
				if w < 0 || w == int32(i) || !c.st[w].committed() {
					continue
				}
				p := c.ops[w].Process
				found := false
				for j := range lat {
					if lat[j].proc == p {
						found = true
						if procPos[w] > procPos[lat[j].w] {
							lat[j].w = w
						}
						break
					}
				}
				if !found {
					lat = append(lat, latest{p, w})
				}
			}
			for _, lw := range lat {
				for y := range acc {
					k1 := acc[y].key
					l1, ok := c.extList(int32(i), &acc[y])
					if !ok || k1 == k2 {
						continue
					}
					ms := marks[lw.proc][k1]
					at := procPos[lw.w]
					j := sort.Search(len(ms), func(j int) bool { return ms[j].at >= at }) - 1
					if j < 0 || ms[j].len <= len(l1) {
						continue
					}
					e := c.ops[lw.w].Value[c.accessOf(int(lw.w), k2).first].Value
					c.sessionWitness(WritesFollowReads,
						fmt.Sprintf("%s saw process %d's append to key %d but not what the process had read of key %d before it", c.name(int32(i)), lw.proc, k2, k1),
						fmt.Sprintf("process %d: %s read key %d as %s, then %s appended %d to key %d; %s read key %d with %d in it, but key %d as %s, shorter than the process's read",
							lw.proc, c.name(ms[j].op), k1, history.ListText(c.listOfExt(ms[j].op, k1)), c.name(lw.w), e, k2, c.name(int32(i)), k2, e, k1, history.ListText(l1)),
						ms[j].op, lw.w, int32(i))
				}
			}
		}
	}
}

// plainBefore reports whether register version a is known to precede b
// by the plain order (nil first; a transaction's read before its write),
// searching at most a few thousand versions.
func (c *checker) plainBefore(a, b int32) bool {
	if a == b {
		return false
	}
	if c.vers[a].isNil {
		return !c.vers[b].isNil
	}
	seen := map[int32]bool{a: true}
	stack := []int32{a}
	for steps := 0; len(stack) > 0 && steps < 4096; steps++ {
		v := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, e := range c.vers[v].succ {
			ve := &c.vedge[e]
			if ve.level != lvPlain {
				continue
			}
			if ve.to == b {
				return true
			}
			if !seen[ve.to] {
				seen[ve.to] = true
				stack = append(stack, ve.to)
			}
		}
	}
	return false
}

func (c *checker) registerSessions(ids []int, byProc map[int][]int32) {
	type mark struct {
		v  int32
		op int32
	}
	type state struct {
		write, read mark // -1 v: none
	}
	vtext := func(v int32) string { return regText(c.vers[v].val, c.vers[v].isNil) }
	for _, p := range ids {
		sts := map[int64]*state{}
		for _, i := range byProc[p] {
			if c.st[i] != stOK {
				continue
			}
			acc := c.accesses(int(i))
			for x := range acc {
				a := &acc[x]
				if c.kind[a.key] != kindRegister {
					continue
				}
				k := a.key
				s := sts[k]
				if s == nil {
					s = &state{write: mark{-1, -1}, read: mark{-1, -1}}
					sts[k] = s
				}
				if r := a.rv; r >= 0 {
					if w := s.write; w.v >= 0 && c.plainBefore(r, w.v) {
						c.sessionWitness(ReadYourWrites,
							fmt.Sprintf("process %d: %s did not see %s's write to key %d", p, c.name(i), c.name(w.op), k),
							fmt.Sprintf("process %d: %s wrote key %d = %s, then %s read key %d = %s, an older version", p, c.name(w.op), k, vtext(w.v), c.name(i), k, vtext(r)),
							w.op, i)
					}
					if rd := s.read; rd.v >= 0 && c.plainBefore(r, rd.v) {
						c.sessionWitness(MonotonicReads,
							fmt.Sprintf("process %d: %s read an older version of key %d than %s", p, c.name(i), k, c.name(rd.op)),
							fmt.Sprintf("process %d: %s read key %d = %s, then %s read it = %s, an older version", p, c.name(rd.op), k, vtext(rd.v), c.name(i), vtext(r)),
							rd.op, i)
					}
				}
				if w := a.wv; w >= 0 {
					if pw := s.write; pw.v >= 0 && c.plainBefore(w, pw.v) {
						c.sessionWitness(MonotonicWrites,
							fmt.Sprintf("process %d: %s's write to key %d is ordered before %s's", p, c.name(i), k, c.name(pw.op)),
							fmt.Sprintf("process %d: %s wrote key %d = %s, then %s wrote %s, which precedes it: %s", p, c.name(pw.op), k, vtext(pw.v), c.name(i), vtext(w), c.plainWhy(w, pw.v)),
							pw.op, i)
					}
					if rd := s.read; rd.v >= 0 && c.plainBefore(w, rd.v) {
						c.sessionWitness(WritesFollowReads,
							fmt.Sprintf("process %d: %s's write to key %d is ordered before what %s read", p, c.name(i), k, c.name(rd.op)),
							fmt.Sprintf("process %d: %s read key %d = %s, then %s wrote %s, which precedes it: %s", p, c.name(rd.op), k, vtext(rd.v), c.name(i), vtext(w), c.plainWhy(w, rd.v)),
							rd.op, i)
					}
				}
			}
			for x := range acc {
				a := &acc[x]
				if c.kind[a.key] != kindRegister {
					continue
				}
				s := sts[a.key]
				if a.rv >= 0 {
					s.read = mark{a.rv, i}
				}
				if a.wv >= 0 {
					s.write = mark{a.wv, i}
				}
			}
		}
	}
}

// plainWhy says why register version a precedes b (the first plain
// version edge out of a on the way).
func (c *checker) plainWhy(a, b int32) string {
	for _, e := range c.vers[a].succ {
		if c.vedge[e].level == lvPlain && (c.vedge[e].to == b || c.plainBefore(c.vedge[e].to, b)) {
			return c.versionWhy(e)
		}
	}
	return "by the plain order"
}
