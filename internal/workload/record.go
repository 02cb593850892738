package workload

import "replab/internal/history"

// Recording a run's history ([run] history, docs/consistency.md): the
// driver records every attempt of every transaction — its process, node,
// times and outcome — and the workload adds what only it knows, the
// micro-operations with the values written and read, through a Recorder.
// The driver hands one to each attempt (Tx.Rec, OpCall.Rec, Scratch.Rec)
// when the run records, and nil when it does not: every method is a no-op
// on nil, so a workload that records pays a nil check when the run does
// not, and a workload that never records pays nothing.

// Recorder takes one attempt's micro-operations for the history.
type Recorder struct {
	set  []history.Mop // Record's: the workload's own slice
	own  []history.Mop // Add's, reused from one attempt to the next
	node string
}

// On reports whether the attempt is recorded (r is not nil): a workload
// may skip work that only the history needs, such as parsing what a
// read returned.
func (r *Recorder) On() bool { return r != nil }

// Record sets the attempt's micro-operations, in the order the
// transaction runs them (history.Append, history.Write, history.ReadNull
// for a read not done yet). The recorder keeps mops itself, not a copy,
// until the attempt has been written: the workload fills in each read's
// result in place as it comes back (ReadList, ReadValue), and must not
// reuse the slice before its next attempt. Set them before running the
// statements, so that an attempt that fails half way still shows every
// write it tried: a failed attempt's history keeps its writes and shows
// its reads as not known. Use Record or Add in one attempt, not both.
func (r *Recorder) Record(mops []history.Mop) {
	if r != nil {
		r.set = mops
	}
}

// Add appends one micro-operation and returns its position, for a
// workload that records as it goes; Mop(i) then fills in a read. The
// recorder's own slice is reused from one attempt to the next.
func (r *Recorder) Add(m history.Mop) int {
	if r == nil {
		return -1
	}
	r.own = append(r.own, m)
	return len(r.own) - 1
}

// Mop is micro-operation i, to fill in; nil on a nil recorder or for an i
// out of range.
func (r *Recorder) Mop(i int) *history.Mop {
	ms := r.Mops()
	if i < 0 || i >= len(ms) {
		return nil
	}
	return &ms[i]
}

// AtNode names the node the attempt ran at, for an Op (the driver knows
// the node of an SQL transaction's connection).
func (r *Recorder) AtNode(name string) {
	if r != nil {
		r.node = name
	}
}

// Reset forgets the last attempt: the driver calls it before each one,
// once it has written the attempt before.
func (r *Recorder) Reset() {
	r.set, r.own, r.node = nil, r.own[:0], ""
}

// Mops are the attempt's micro-operations as recorded.
func (r *Recorder) Mops() []history.Mop {
	switch {
	case r == nil:
		return nil
	case r.set != nil:
		return r.set
	}
	return r.own
}

// Node is the node AtNode named ("" when none).
func (r *Recorder) Node() string {
	if r == nil {
		return ""
	}
	return r.node
}

// HistoryByDefault is a workload made for checking (list-append,
// rw-register): its runs record their history unless the spec says
// [run] history = false.
type HistoryByDefault interface {
	HistoryByDefault() bool
}
