package check

import (
	"fmt"
	"sort"
	"time"

	"replab/internal/history"
)

// status is what the checker knows of an operation's outcome.
type status uint8

const (
	stSkipped     status = iota // not checked: another f, or beyond the budget
	stOK                        // committed
	stFail                      // not committed
	stInfo                      // info whose writes some read observed: committed
	stUndecided                 // info with writes, none observed: unknown
	stInfoNoWrite               // info without writes: nothing to decide
)

func (s status) committed() bool { return s == stOK || s == stInfo }

type keyKind uint8

const (
	kindNone keyKind = iota
	kindList
	kindRegister
)

// access is one transaction's use of one key.
type access struct {
	key   int64
	read  int32 // the external read: the first read, when no write of the key precedes it; -1
	first int32 // the first append or write; -1
	last  int32 // the last append or write; -1
	rv    int32 // register: the version the external read returned; -1
	wv    int32 // register: the version the last write installed; -1
}

// wref locates a written value.
type wref struct {
	op  int32 // the writer's position in ops
	mop int32
	pos int32 // list: position in the key's recovered order; -1 when not placed
}

type kv struct{ k, v int64 }

type checker struct {
	ops      []history.Op
	opts     Options
	res      *Result
	deadline time.Time
	n        int      // ops[:n] are checked; later ones only name writers
	st       []status // per op
	acc      []access
	accOff   []int32 // accesses of op i: acc[accOff[i]:accOff[i+1]], for i < n
	kind     map[int64]keyKind
	kindAt   map[int64]int32 // the op that gave a key its kind
	writer   map[kv]wref
	t0       int64

	node []int32 // op → txn node, -1 when not in the graph
	txn  []int32 // txn node → op
	g    graph

	lists []*listKey
	regs  []*regKey
	vers  []version     // register versions, by id
	vedge []versionEdge // inferred register version orders, by id

	cut, cutMax [nLevels]int // components whose search ran out of steps, by level; the largest
}

func newChecker(ops []history.Op, opts Options) *checker {
	return &checker{ops: ops, opts: opts, res: newResult(), deadline: time.Now().Add(opts.MaxDuration)}
}

func (c *checker) expired() bool { return time.Now().After(c.deadline) }

// bytesPerOp, bytesPerMop and bytesPerElement estimate the checker's
// memory beyond the ops themselves (maps, accesses, the graph), measured on
// bench/check's list-append histories with a margin.
const (
	bytesPerOp      = 900
	bytesPerMop     = 260
	bytesPerElement = 24
)

func (c *checker) run() error {
	c.budget()
	if err := c.prepare(); err != nil {
		return err
	}
	c.internal()
	c.analyseLists()
	c.analyseRegisters()
	c.sessions()
	c.orderEdges()
	c.g.build()
	c.cycles()
	return nil
}

// budget decides how many operations are checked.
func (c *checker) budget() {
	c.n = len(c.ops)
	var mops, elems int64
	for i := range c.ops {
		mops += int64(len(c.ops[i].Value))
		for _, m := range c.ops[i].Value {
			elems += int64(len(m.List))
		}
	}
	est := int64(len(c.ops))*bytesPerOp + mops*bytesPerMop + elems*bytesPerElement
	limit := len(c.ops)
	why := ""
	if limit > c.opts.MaxOps {
		limit, why = c.opts.MaxOps, fmt.Sprintf("the budget of %d operations", c.opts.MaxOps)
	}
	if est > c.opts.MaxMemoryBytes && len(c.ops) > 0 {
		if l := int(float64(len(c.ops)) * float64(c.opts.MaxMemoryBytes) / float64(est)); l < limit {
			limit = l
			why = fmt.Sprintf("the memory budget of %d MiB (the whole history was estimated at %d MiB)", c.opts.MaxMemoryBytes>>20, est>>20)
		}
	}
	if limit < len(c.ops) {
		c.n = limit
		c.res.skip("operations from index %d on (%d of %d) were not checked, for %s: their writes only name the values' writers, and their reads are not checked",
			c.ops[limit].Index, len(c.ops)-limit, len(c.ops), why)
	}
}

// prepare sorts operations by outcome, attributes every written value to
// its one writer, fixes each key's kind and each transaction's accesses,
// and decides the info operations.
func (c *checker) prepare() error {
	ops := c.ops
	c.st = make([]status, len(ops))
	c.kind = map[int64]keyKind{}
	c.kindAt = map[int64]int32{}
	c.writer = make(map[kv]wref, len(ops))
	otherF := 0
	for i := range ops {
		op := &ops[i]
		if op.F != history.FTxn {
			otherF++
			continue
		}
		if i < c.n {
			switch op.Type {
			case history.OK:
				c.st[i] = stOK
			case history.Fail:
				c.st[i] = stFail
			case history.Info:
				c.st[i] = stInfoNoWrite
			default:
				return &OpError{Pos: i, Index: op.Index, OtherPos: -1, Msg: fmt.Sprintf("type %q: want ok, fail or info", op.Type)}
			}
		}
		for j, m := range op.Value {
			want := kindRegister
			switch m.Fn {
			case history.FnAppend:
				want = kindList
			case history.FnRead:
				switch m.Got {
				case history.GotList:
					want = kindList
				case history.GotValue:
				default:
					want = kindNone // null: fits either
				}
			}
			if want != kindNone {
				if err := c.setKind(i, m, want); err != nil {
					return err
				}
			}
			if !m.IsWrite() {
				continue
			}
			k := kv{m.Key, m.Value}
			if prev, dup := c.writer[k]; dup {
				verb := map[history.Fn]string{history.FnAppend: "appends", history.FnWrite: "writes"}[m.Fn]
				return &OpError{Pos: i, Index: op.Index, OtherPos: int(prev.op), OtherIndex: ops[prev.op].Index,
					Msg: fmt.Sprintf("%s %d to key %d, as {other} did: appended and written values must be unique per key, or a read cannot tell which write it saw", verb, m.Value, m.Key)}
			}
			c.writer[k] = wref{op: int32(i), mop: int32(j), pos: -1}
		}
	}
	if otherF > 0 {
		c.res.skip("%d operations whose f is not %q were not checked", otherF, history.FTxn)
	}
	for i := range ops {
		switch {
		case i >= c.n || ops[i].F != history.FTxn:
			c.res.Operations.Skipped++
		case ops[i].Type == history.OK:
			c.res.Operations.OK++
		case ops[i].Type == history.Fail:
			c.res.Operations.Fail++
		default:
			c.res.Operations.Info++
		}
	}
	for _, k := range c.kind {
		if k == kindList {
			c.res.Keys.List++
		} else {
			c.res.Keys.Register++
		}
	}

	// Accesses, and the first invocation (times in witnesses count from it).
	c.accOff = make([]int32, c.n+1)
	first := true
	for i := 0; i < c.n; i++ {
		c.accOff[i] = int32(len(c.acc))
		op := &ops[i]
		if c.st[i] == stSkipped {
			continue
		}
		if first || op.InvokeNs < c.t0 {
			c.t0, first = op.InvokeNs, false
		}
		start := len(c.acc)
		for j, m := range op.Value {
			a := -1
			for x := start; x < len(c.acc); x++ {
				if c.acc[x].key == m.Key {
					a = x
					break
				}
			}
			if a < 0 {
				c.acc = append(c.acc, access{key: m.Key, read: -1, first: -1, last: -1, rv: -1, wv: -1})
				a = len(c.acc) - 1
			}
			ac := &c.acc[a]
			if m.IsWrite() {
				if ac.first < 0 {
					ac.first = int32(j)
				}
				ac.last = int32(j)
			} else if ac.read < 0 && ac.first < 0 && c.st[i] == stOK {
				// Only ok transactions' reads are observations. A register
				// read of null read the initial nil; a null list read is
				// not a read.
				if m.Got != history.GotNull || c.kind[m.Key] == kindRegister {
					ac.read = int32(j)
				}
			}
		}
	}
	c.accOff[c.n] = int32(len(c.acc))

	// Info operations: committed when a read observed one of their writes.
	observed := map[int32]bool{}
	for i := 0; i < c.n; i++ {
		if c.st[i] != stOK {
			continue
		}
		for _, m := range ops[i].Value {
			if m.Fn != history.FnRead {
				continue
			}
			switch m.Got {
			case history.GotValue:
				if w, ok := c.writer[kv{m.Key, m.Value}]; ok && ops[w.op].Type == history.Info {
					observed[w.op] = true
				}
			case history.GotList:
				for _, v := range m.List {
					if w, ok := c.writer[kv{m.Key, v}]; ok && ops[w.op].Type == history.Info {
						observed[w.op] = true
					}
				}
			}
		}
	}
	for i := 0; i < c.n; i++ {
		if c.st[i] != stInfoNoWrite {
			continue
		}
		writes := false
		for _, m := range ops[i].Value {
			writes = writes || m.IsWrite()
		}
		switch {
		case observed[int32(i)]:
			c.st[i] = stInfo
		case writes:
			c.st[i] = stUndecided
			c.res.InfoUndecided++
		}
	}

	// Graph nodes: the committed transactions, in the history's order.
	c.node = make([]int32, len(ops))
	for i := range c.node {
		c.node[i] = -1
		if i < c.n && c.st[i].committed() {
			c.node[i] = int32(len(c.txn))
			c.txn = append(c.txn, int32(i))
		}
	}
	c.g.nTxn = len(c.txn)
	c.g.nodes = len(c.txn)
	c.res.TransactionsChecked = len(c.txn)
	c.res.TimeOriginNs = c.t0
	return nil
}

func (c *checker) setKind(i int, m history.Mop, want keyKind) error {
	have, ok := c.kind[m.Key]
	if !ok {
		c.kind[m.Key] = want
		c.kindAt[m.Key] = int32(i)
		return nil
	}
	if have == want {
		return nil
	}
	name := map[keyKind]string{kindList: "a list", kindRegister: "a register"}
	o := c.kindAt[m.Key]
	return &OpError{Pos: i, Index: c.ops[i].Index, OtherPos: int(o), OtherIndex: c.ops[o].Index,
		Msg: fmt.Sprintf("uses key %d as %s (%s), which {other} used as %s: a key holds a list or a register, not both", m.Key, name[want], history.MopsText([]history.Mop{m}), name[have])}
}

// accesses returns op i's accesses.
func (c *checker) accesses(i int) []access { return c.acc[c.accOff[i]:c.accOff[i+1]] }

// accessOf returns op i's access to key, or nil.
func (c *checker) accessOf(i int, key int64) *access {
	for x := c.accOff[i]; x < c.accOff[i+1]; x++ {
		if c.acc[x].key == key {
			return &c.acc[x]
		}
	}
	return nil
}

// processes returns each process's checked transactions (ok, fail and
// info) in the order it ran them: by invocation, then index.
func (c *checker) processes() (ids []int, byProc map[int][]int32) {
	byProc = map[int][]int32{}
	for i := 0; i < c.n; i++ {
		if c.st[i] == stSkipped {
			continue
		}
		p := c.ops[i].Process
		if _, ok := byProc[p]; !ok {
			ids = append(ids, p)
		}
		byProc[p] = append(byProc[p], int32(i))
	}
	sort.Ints(ids)
	for _, p := range ids {
		l := byProc[p]
		sort.SliceStable(l, func(a, b int) bool {
			oa, ob := &c.ops[l[a]], &c.ops[l[b]]
			if oa.InvokeNs != ob.InvokeNs {
				return oa.InvokeNs < ob.InvokeNs
			}
			return oa.Index < ob.Index
		})
	}
	return ids, byProc
}
