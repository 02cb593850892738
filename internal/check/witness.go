package check

import (
	"fmt"
	"slices"

	"replab/internal/history"
)

// name is how a witness names op i: T and its index.
func (c *checker) name(i int32) string { return fmt.Sprintf("T%d", c.ops[i].Index) }

// txnW is op i as a witness shows it.
func (c *checker) txnW(i int32) Txn {
	op := &c.ops[i]
	return Txn{Index: op.Index, Process: op.Process, Node: op.Node, Type: op.Type,
		InvokeNs: op.InvokeNs, CompleteNs: op.CompleteNs, TxnType: op.TxnType, Value: op.Value}
}

// txnsW is the ops as a witness shows them, each once.
func (c *checker) txnsW(ops ...int32) []Txn {
	out := make([]Txn, 0, len(ops))
	for i, o := range ops {
		if !slices.Contains(ops[:i], o) {
			out = append(out, c.txnW(o))
		}
	}
	return out
}

// at is a time as witnesses print it: seconds since the history's first
// invocation.
func (c *checker) at(ns int64) string { return fmt.Sprintf("+%.6fs", float64(ns-c.t0)/1e9) }

// outcome says how a writer ended, for witnesses.
func (c *checker) outcome(i int32) string {
	switch c.st[i] {
	case stFail:
		return "failed"
	case stInfo:
		return "ended unknown (info) but was observed"
	case stUndecided:
		return "ended unknown (info)"
	case stSkipped:
		return "was not checked"
	}
	return "committed"
}

// readOf returns op i's read of key (its external read when there is one).
func (c *checker) readOf(i int32, key int64) (history.Mop, bool) {
	if int(i) < c.n {
		if a := c.accessOf(int(i), key); a != nil && a.read >= 0 {
			return c.ops[i].Value[a.read], true
		}
	}
	for _, m := range c.ops[i].Value {
		if m.Key == key && m.Fn == history.FnRead && m.Got != history.GotNull {
			return m, true
		}
	}
	return history.Mop{}, false
}

// readText is a read's result: [1 2] for a list, 3 or nil for a register.
func readText(m history.Mop) string {
	switch m.Got {
	case history.GotList:
		return history.ListText(m.List)
	case history.GotValue:
		return fmt.Sprint(m.Value)
	}
	return "nil"
}
