package check

import "sort"

// orderEdges adds process order and real-time order between committed
// transactions.
//
// Process order: each process's transactions in the order it ran them;
// an ok transaction precedes the process's next ones. An info
// transaction orders nothing after it (it may commit later).
//
// Real time: A precedes B when A completed before B was invoked (strictly:
// at the same nanosecond they are concurrent). Only ok transactions have a
// completion; an info one may commit at any time after its invocation.
// The order is carried by barrier nodes (see graph.go).
func (c *checker) orderEdges() {
	ids, byProc := c.processes()
	for _, p := range ids {
		last := int32(-1)
		for _, i := range byProc[p] {
			n := c.node[i]
			if n < 0 {
				continue
			}
			if last >= 0 {
				c.g.add(last, n, kPO, lvProcess, 0, 0, -1)
			}
			if c.st[i] == stOK {
				last = n
			}
		}
	}

	type event struct {
		t        int64
		complete bool
		n        int32
	}
	evs := make([]event, 0, 2*len(c.txn))
	for n, i := range c.txn {
		evs = append(evs, event{c.ops[i].InvokeNs, false, int32(n)})
		if c.st[i] == stOK {
			evs = append(evs, event{c.ops[i].CompleteNs, true, int32(n)})
		}
	}
	sort.Slice(evs, func(a, b int) bool {
		ea, eb := evs[a], evs[b]
		if ea.t != eb.t {
			return ea.t < eb.t
		}
		if ea.complete != eb.complete {
			return !ea.complete // invocations first: equal times are concurrent
		}
		return ea.n < eb.n
	})
	// open collects completions since the last invocation; closed is the
	// latest barrier an invocation has seen.
	open, closed := int32(-1), int32(-1)
	for _, e := range evs {
		if e.complete {
			if open < 0 {
				open = c.g.addAux(auxBarrier)
				if closed >= 0 {
					c.g.add(closed, open, kRT, lvRealtime, 0, 0, -1)
				}
			}
			c.g.add(e.n, open, kRT, lvRealtime, 0, 0, -1)
			continue
		}
		if open >= 0 {
			closed, open = open, -1
		}
		if closed >= 0 {
			c.g.add(closed, e.n, kRT, lvRealtime, 0, 0, -1)
		}
	}
}
