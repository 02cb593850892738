package check

import (
	"fmt"
	"slices"
	"sort"

	"replab/internal/history"
)

// List-append keys. Every read of a list shows the order of every append
// before it, so the key's version order is the longest read, and every
// other read must be a prefix of it. Values are unique, so each element
// names the one transaction that appended it. From the order:
//
//   - ww: the transaction that appended element i → the one that appended
//     element i+1;
//   - wr: the appender of a read's last element → the reader;
//   - rw: a reader → the appender of the element after its read's last
//     (the next version it did not see).
//
// Only a transaction's external read of a key (its first read, before it
// appended to the key) gives wr and rw edges: later reads include its own
// appends. Elements no read has shown (appends after the last read of a
// key) have no place in the order and give no edges.

type ref struct{ op, mop int32 }

type listKey struct {
	key   int64
	reads []ref // every list read of an ok transaction, in history order
	order []int64
	wop   []int32        // the writer of each element of order; -1 when none
	from  ref            // the read the order was taken from; op -1 when none
	bad   map[ref]string // reads left out of the edges: why
	// unplaced are committed appends no read shows: they follow the whole
	// order, in an order of their own that is unknown.
	unplaced []ref
}

// list returns the list a read returned.
func (c *checker) list(r ref) []int64 { return c.ops[r.op].Value[r.mop].List }

func (c *checker) analyseLists() {
	byKey := map[int64]*listKey{}
	for i := 0; i < c.n; i++ {
		if c.st[i] != stOK {
			continue
		}
		for j, m := range c.ops[i].Value {
			if m.Fn != history.FnRead || m.Got != history.GotList {
				continue
			}
			lk := byKey[m.Key]
			if lk == nil {
				lk = &listKey{key: m.Key, from: ref{-1, -1}}
				byKey[m.Key] = lk
			}
			lk.reads = append(lk.reads, ref{int32(i), int32(j)})
		}
	}
	keys := make([]int64, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		lk := byKey[k]
		c.lists = append(c.lists, lk)
		c.listOrder(lk)
	}
	// Committed appends no read shows.
	for i := 0; i < c.n; i++ {
		if !c.st[i].committed() {
			continue
		}
		for j, m := range c.ops[i].Value {
			if m.Fn != history.FnAppend {
				continue
			}
			if w := c.writer[kv{m.Key, m.Value}]; w.pos < 0 {
				if lk := byKey[m.Key]; lk != nil {
					lk.unplaced = append(lk.unplaced, ref{int32(i), int32(j)})
				}
			}
		}
	}
	for _, lk := range c.lists {
		c.listAnomalies(lk)
		c.listEdges(lk)
	}
}

// listOrder recovers the key's order from the longest read without
// duplicates, and reports reads with duplicates, reads that are not a
// prefix of it, and elements no one appended.
func (c *checker) listOrder(lk *listKey) {
	byLen := append([]ref(nil), lk.reads...)
	sort.SliceStable(byLen, func(a, b int) bool { return len(c.list(byLen[a])) > len(c.list(byLen[b])) })
	lk.bad = map[ref]string{}
	for _, r := range byLen {
		if d, ok := duplicate(c.list(r)); ok {
			c.reportDuplicate(lk, r, d)
			continue
		}
		lk.order, lk.from = c.list(r), r
		break
	}
	incompatible := 0
	var firstBad ref
	for _, r := range lk.reads {
		if _, bad := lk.bad[r]; bad || r == lk.from {
			continue
		}
		l := c.list(r)
		if len(l) <= len(lk.order) && slices.Equal(l, lk.order[:len(l)]) {
			continue
		}
		if d, ok := duplicate(l); ok {
			c.reportDuplicate(lk, r, d)
			continue
		}
		lk.bad[r] = "incompatible"
		if incompatible == 0 {
			firstBad = r
		}
		incompatible++
		c.garbage(lk, r, l)
	}
	if incompatible > 0 {
		a, b := lk.from, firstBad
		l1, l2 := c.list(a), c.list(b)
		i := 0
		for i < len(l1) && i < len(l2) && l1[i] == l2[i] {
			i++
		}
		d := []string{
			fmt.Sprintf("%s read key %d as %s and %s read it as %s: they differ at position %d, so no one order of key %d's appends explains both",
				c.name(a.op), lk.key, history.ListText(l1), c.name(b.op), history.ListText(l2), i+1, lk.key),
		}
		if incompatible > 1 {
			d = append(d, fmt.Sprintf("%d reads of key %d disagree with the longest read %s; they are left out of the dependency graph", incompatible, lk.key, c.name(a.op)))
		}
		c.res.add(c.opts.MaxWitnesses, Witness{Class: IncompatibleOrder,
			Summary: fmt.Sprintf("reads of key %d show incompatible orders", lk.key),
			Txns:    c.txnsW(a.op, b.op), Details: d})
	}
	lk.wop = make([]int32, len(lk.order))
	for i, e := range lk.order {
		w, ok := c.writer[kv{lk.key, e}]
		lk.wop[i] = -1
		if !ok {
			continue
		}
		lk.wop[i] = w.op
		w.pos = int32(i)
		c.writer[kv{lk.key, e}] = w
	}
	c.garbage(lk, lk.from, lk.order)
}

// duplicate returns a value that appears twice in l.
func duplicate(l []int64) (int64, bool) {
	if len(l) < 32 {
		for i := 1; i < len(l); i++ {
			if slices.Contains(l[:i], l[i]) {
				return l[i], true
			}
		}
		return 0, false
	}
	seen := make(map[int64]struct{}, len(l))
	for _, v := range l {
		if _, dup := seen[v]; dup {
			return v, true
		}
		seen[v] = struct{}{}
	}
	return 0, false
}

func (c *checker) reportDuplicate(lk *listKey, r ref, d int64) {
	lk.bad[r] = "duplicate"
	l := c.list(r)
	c.res.add(c.opts.MaxWitnesses, Witness{Class: DuplicateElements,
		Summary: fmt.Sprintf("%s read key %d with %d in it twice", c.name(r.op), lk.key, d),
		Txns:    c.txnsW(r.op),
		Details: []string{fmt.Sprintf("%s read key %d as %s: each value is appended once, so it cannot appear twice", c.name(r.op), lk.key, history.ListText(l))}})
	c.garbage(lk, r, l)
}

// garbage reports the elements of a read that no operation appended.
func (c *checker) garbage(lk *listKey, r ref, l []int64) {
	for _, e := range l {
		if _, ok := c.writer[kv{lk.key, e}]; ok {
			continue
		}
		c.res.add(c.opts.MaxWitnesses, Witness{Class: GarbageRead,
			Summary: fmt.Sprintf("%s read %d in key %d, which no operation appended", c.name(r.op), e, lk.key),
			Txns:    c.txnsW(r.op),
			Details: []string{fmt.Sprintf("%s read key %d as %s; no operation of the history appended %d to key %d", c.name(r.op), lk.key, history.ListText(l), e, lk.key)}})
		return
	}
}

// writerAt returns the writer of the order's element i.
func (c *checker) writerAt(lk *listKey, i int) (wref, bool) {
	w, ok := c.writer[kv{lk.key, lk.order[i]}]
	return w, ok
}

// listAnomalies finds what is not a cycle: aborted reads (G1a), dirty
// updates, intermediate reads (G1b) and lost updates.
func (c *checker) listAnomalies(lk *listKey) {
	k := lk.key
	// The first element appended by a failed transaction.
	failedAt := -1
	for i := range lk.order {
		if w, ok := c.writerAt(lk, i); ok && c.st[w.op] == stFail {
			failedAt = i
			break
		}
	}
	if failedAt >= 0 {
		w, _ := c.writerAt(lk, failedAt)
		reported := int32(-1)
		for _, r := range lk.reads {
			if _, bad := lk.bad[r]; bad || len(c.list(r)) <= failedAt || r.op == reported {
				continue
			}
			reported = r.op
			c.res.add(c.opts.MaxWitnesses, Witness{Class: G1a,
				Summary: fmt.Sprintf("%s read %d in key %d, appended by %s, which failed", c.name(r.op), lk.order[failedAt], k, c.name(w.op)),
				Txns:    c.txnsW(r.op, w.op),
				Details: []string{fmt.Sprintf("%s read key %d as %s; %d was appended by %s, which failed (aborted), so no committed transaction should see it",
					c.name(r.op), k, history.ListText(c.list(r)), lk.order[failedAt], c.name(w.op))}})
		}
		for i := failedAt + 1; i < len(lk.order); i++ {
			if w2, ok := c.writerAt(lk, i); ok && c.st[w2.op].committed() {
				c.res.add(c.opts.MaxWitnesses, Witness{Class: DirtyUpdate,
					Summary: fmt.Sprintf("key %d: %s's committed append follows %s's, which failed", k, c.name(w2.op), c.name(w.op)),
					Txns:    c.txnsW(w.op, w2.op, lk.from.op),
					Details: []string{fmt.Sprintf("%s read key %d as %s: %d was appended by %s, which failed, yet %d, appended after it by %s, committed",
						c.name(lk.from.op), k, history.ListText(lk.order), lk.order[failedAt], c.name(w.op), lk.order[i], c.name(w2.op))}})
				break
			}
		}
	}
	// Intermediate reads and lost updates, from external reads.
	lost := map[int][]int32{}
	for _, r := range lk.reads {
		if _, bad := lk.bad[r]; bad {
			continue
		}
		a := c.accessOf(int(r.op), k)
		if a == nil || a.read != r.mop {
			continue
		}
		l := c.list(r)
		if len(l) > 0 {
			if w, ok := c.writer[kv{k, l[len(l)-1]}]; ok && w.op != r.op && c.st[w.op].committed() {
				if wa := c.accessOf(int(w.op), k); wa != nil && wa.last != w.mop {
					later := c.ops[w.op].Value[wa.last].Value
					c.res.add(c.opts.MaxWitnesses, Witness{Class: G1b,
						Summary: fmt.Sprintf("%s read an intermediate state of %s on key %d", c.name(r.op), c.name(w.op), k),
						Txns:    c.txnsW(r.op, w.op),
						Details: []string{fmt.Sprintf("%s read key %d as %s: its last element %d is %s's append, but %s appended %d to key %d after it, so %s saw %s before it was complete",
							c.name(r.op), k, history.ListText(l), l[len(l)-1], c.name(w.op), c.name(w.op), later, k, c.name(r.op), c.name(w.op))}})
				}
			}
		}
		if a.last >= 0 {
			lost[len(l)] = append(lost[len(l)], r.op)
		}
	}
	lens := make([]int, 0, len(lost))
	for n := range lost {
		lens = append(lens, n)
	}
	slices.Sort(lens)
	for _, n := range lens {
		ts := lost[n]
		if len(ts) < 2 {
			continue
		}
		d := []string{fmt.Sprintf("%s and %s both read key %d as %s and both appended to it (%d and %d): each append was made without seeing the other, so one of them is lost to the other's reader",
			c.name(ts[0]), c.name(ts[1]), k, history.ListText(c.listOfExt(ts[0], k)), c.ops[ts[0]].Value[c.accessOf(int(ts[0]), k).first].Value,
			c.ops[ts[1]].Value[c.accessOf(int(ts[1]), k).first].Value)}
		if len(ts) > 2 {
			d = append(d, fmt.Sprintf("%d transactions in all read that version of key %d and appended to it", len(ts), k))
		}
		c.res.add(c.opts.MaxWitnesses, Witness{Class: LostUpdate,
			Summary: fmt.Sprintf("%d transactions read the same version of key %d and appended to it", len(ts), k),
			Txns:    c.txnsW(ts[:2]...), Details: d})
	}
}

// listOfExt is op i's external read of key.
func (c *checker) listOfExt(i int32, key int64) []int64 {
	m, _ := c.readOf(i, key)
	return m.List
}

// maxUnplacedEdges bounds the edges to appends no read shows, per key.
const maxUnplacedEdges = 1_000_000

// listEdges adds the key's ww, wr and rw edges. An append no read shows
// comes after every element of the order, so the appender of the order's
// last element precedes it (a ww path, as one edge) and so does every
// reader (an rw edge followed by ww ones, as one rw edge: the same number
// of anti-dependencies, though two may then look adjacent).
func (c *checker) listEdges(lk *listKey) {
	k := lk.key
	unplaced := lk.unplaced
	if n := len(lk.reads) * len(unplaced); n > maxUnplacedEdges {
		c.res.skip("key %d: the %d appends no read shows were not ordered after its %d reads (more than %d edges)", k, len(unplaced), len(lk.reads), maxUnplacedEdges)
		unplaced = nil
	}
	if len(lk.order) > 0 {
		if last, ok := c.writerAt(lk, len(lk.order)-1); ok && c.node[last.op] >= 0 {
			for x, u := range unplaced {
				if u.op != last.op && (x == 0 || unplaced[x-1].op != u.op) {
					c.g.add(c.node[last.op], c.node[u.op], kWW, lvPlain, k, c.ops[u.op].Value[u.mop].Value, -1)
				}
			}
		}
	}
	for i := 1; i < len(lk.order); i++ {
		a, okA := c.writerAt(lk, i-1)
		b, okB := c.writerAt(lk, i)
		if okA && okB && a.op != b.op && c.node[a.op] >= 0 && c.node[b.op] >= 0 {
			c.g.add(c.node[a.op], c.node[b.op], kWW, lvPlain, k, lk.order[i], -1)
		}
	}
	for _, r := range lk.reads {
		if _, bad := lk.bad[r]; bad {
			continue
		}
		a := c.accessOf(int(r.op), k)
		if a == nil || a.read != r.mop {
			continue
		}
		rn := c.node[r.op]
		m := len(c.list(r))
		var last wref
		okLast := false
		if m > 0 {
			last, okLast = c.writerAt(lk, m-1)
			if okLast && last.op != r.op && c.node[last.op] >= 0 {
				c.g.add(c.node[last.op], rn, kWR, lvPlain, k, lk.order[m-1], -1)
			}
		}
		if m < len(lk.order) {
			next, ok := c.writerAt(lk, m)
			if ok && next.op != r.op && c.node[next.op] >= 0 && !(okLast && last.op == next.op) {
				c.g.add(rn, c.node[next.op], kRW, lvPlain, k, lk.order[m], -1)
			}
		}
		for x, u := range unplaced {
			// (A read that ends inside u's writer is G1b, not an rw edge.)
			if u.op != r.op && (x == 0 || unplaced[x-1].op != u.op) && !(okLast && last.op == u.op) {
				c.g.add(rn, c.node[u.op], kRW, lvPlain, k, c.ops[u.op].Value[u.mop].Value, -1)
			}
		}
	}
}

// listWhy explains a list edge between ops a and b.
func (c *checker) listWhy(e *edge, a, b int32) string {
	k := e.key
	w := c.writer[kv{k, e.val}]
	lk := c.listKey(k)
	if w.pos < 0 { // an append no read shows
		switch e.kind {
		case kWW:
			return fmt.Sprintf("%s appended %d to key %d, the last element any read shows; %s appended %d, which no read shows, so it comes later",
				c.name(a), lk.order[len(lk.order)-1], k, c.name(b), e.val)
		case kRW:
			return fmt.Sprintf("%s read key %d as %s, %s appended %d to key %d, which no read shows, so it comes after %s's read",
				c.name(a), k, history.ListText(c.listOfExt(a, k)), c.name(b), e.val, k, c.name(a))
		}
	}
	switch e.kind {
	case kWW:
		prev := lk.order[w.pos-1]
		return fmt.Sprintf("%s appended %d to key %d, %s appended %d, the next element in key %d's order",
			c.name(a), prev, k, c.name(b), e.val, k)
	case kWR:
		return fmt.Sprintf("%s read key %d as %s, whose last element %d %s appended",
			c.name(b), k, history.ListText(c.listOfExt(b, k)), e.val, c.name(a))
	case kRW:
		l := c.listOfExt(a, k)
		if len(l) == 0 {
			return fmt.Sprintf("%s read key %d as [], %s appended %d to key %d, its first element", c.name(a), k, c.name(b), e.val, k)
		}
		return fmt.Sprintf("%s read key %d as %s, %s appended %d to key %d, the next version after %s's read",
			c.name(a), k, history.ListText(l), c.name(b), e.val, k, c.name(a))
	}
	return ""
}

func (c *checker) listKey(k int64) *listKey {
	i := sort.Search(len(c.lists), func(i int) bool { return c.lists[i].key >= k })
	return c.lists[i]
}
