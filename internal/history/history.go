// Package history owns the recording of a run's operations: every
// transaction a user issued, with its invocation and completion times on the
// lab's one clock and the values it wrote and read. It is data in, data out:
// a streaming Writer for the driver, a streaming Reader that tells a crash's
// cut-short last line from a malformed one, and a converter to Jepsen's EDN
// history for elle-cli. The checker (internal/check) reads it; nothing here
// knows about engines or workloads.
//
// # The JSON form (history.jsonl)
//
// One JSON object per line, one line per completed operation, in the order
// they completed (Writer assigns index 0, 1, 2, … as operations are
// recorded):
//
//	{"index":0,"process":3,"node":"eu","type":"ok","f":"txn","invoke_ns":1204000000,"complete_ns":1204350000,"txn_type":"append","value":[["append",5,12],["r",7,[1,2]]]}
//	{"index":1,"process":4,"node":"us","type":"fail","f":"txn","invoke_ns":1204100000,"complete_ns":1204400000,"txn_type":"append","value":[["append",5,13]],"error":"40001"}
//
// Fields:
//
//   - index: the operation's position in the file, from 0 (Jepsen's :index
//     counts invocations too; ToJepsenEDN renumbers).
//   - process: the user that issued it. A user that reconnects after an
//     "info" operation takes a new process number (Jepsen does the same), so
//     one process never has two operations in flight.
//   - node: the node the transaction ran at.
//   - type: "ok" (committed), "fail" (certainly not committed) or "info"
//     (outcome unknown: a timeout, a lost connection).
//   - f: "txn".
//   - invoke_ns, complete_ns: CLOCK_MONOTONIC in nanoseconds (the lab's one
//     clock, shared by every site), so the times of operations at different
//     sites are one real-time order. For "info", complete_ns is when the
//     user gave up, not when the transaction ended.
//   - commit_ns: when the COMMIT was sent, on the same clock; left out when
//     not known (0). The lag probe counts a change's lag from this moment,
//     so staleness and lag can be compared from one origin.
//   - txn_type: the workload's transaction type name.
//   - value: the micro-operations in the order the transaction ran them,
//     each a three-element array: ["append", key, value] appends value to
//     the list at key; ["r", key, [v1, v2, …]] read the list at key (oldest
//     element first; [] is an empty list); ["w", key, value] writes a
//     register; ["r", key, value] read a register. A read's value is null
//     when it was not read or is not known (fail and info operations), and,
//     in an "ok" operation on a register key, when the key had no value
//     yet (the initial nil). Keys and values are 64-bit integers.
//   - error: for fail and info, the error code (e.g. SQLSTATE "40001");
//     left out when empty.
//
// Unknown fields are ignored when reading, so the format can grow.
//
// Jepsen's fields map as :process ← process, :type ← type (with an :invoke
// before each completion), :f ← f, :value ← value (keywords for the
// functions, nil for null), :time ← invoke_ns or complete_ns (relative to
// the first invocation), :index ← the event's position. See ToJepsenEDN.
package history

import (
	"fmt"
	"strconv"
	"strings"
)

// Type is an operation's outcome.
type Type string

const (
	// OK: the transaction committed; its reads are what it observed.
	OK Type = "ok"
	// Fail: the transaction certainly did not commit (an abort, a refused
	// statement); its writes never happened.
	Fail Type = "fail"
	// Info: the outcome is unknown (a timeout, a connection lost before the
	// commit's answer): its writes may or may not have happened.
	Info Type = "info"
)

// Valid reports whether t is one of OK, Fail and Info.
func (t Type) Valid() bool { return t == OK || t == Fail || t == Info }

// Fn is what a micro-operation does.
type Fn uint8

const (
	// FnAppend is ["append", key, value]: append value to the list at key.
	FnAppend Fn = iota + 1
	// FnRead is ["r", key, …]: read the list or register at key.
	FnRead
	// FnWrite is ["w", key, value]: write value to the register at key.
	FnWrite
)

// String is the function's name in the JSON form.
func (f Fn) String() string {
	switch f {
	case FnAppend:
		return "append"
	case FnRead:
		return "r"
	case FnWrite:
		return "w"
	}
	return "fn(" + strconv.Itoa(int(f)) + ")"
}

// Got is what a read returned.
type Got uint8

const (
	// GotNull is JSON null: not read, not known, or (in an ok operation on
	// a register key) the key's initial nil.
	GotNull Got = iota
	// GotValue is a register's value (in Mop.Value).
	GotValue
	// GotList is a list's elements (in Mop.List).
	GotList
)

// Mop is one micro-operation of a transaction. Build one with Append,
// Write, ReadList, ReadValue or ReadNull.
type Mop struct {
	Fn  Fn
	Key int64
	// Value is the value appended or written, or a register read's value
	// (when Got is GotValue).
	Value int64
	// List is a list read's elements, oldest first (when Got is GotList).
	List []int64
	// Got says what a read returned; it is GotNull for appends and writes.
	Got Got
}

// Append is ["append", key, value].
func Append(key, value int64) Mop { return Mop{Fn: FnAppend, Key: key, Value: value} }

// Write is ["w", key, value].
func Write(key, value int64) Mop { return Mop{Fn: FnWrite, Key: key, Value: value} }

// ReadList is ["r", key, [list…]]: a list read (a nil list is the empty
// list, written []).
func ReadList(key int64, list []int64) Mop {
	return Mop{Fn: FnRead, Key: key, List: list, Got: GotList}
}

// ReadValue is ["r", key, value]: a register read that found value.
func ReadValue(key, value int64) Mop {
	return Mop{Fn: FnRead, Key: key, Value: value, Got: GotValue}
}

// ReadNull is ["r", key, null]: a read not known (an invocation, a failed
// or unknown transaction), or a register read of a key with no value yet.
func ReadNull(key int64) Mop { return Mop{Fn: FnRead, Key: key} }

// IsWrite reports whether m appends or writes.
func (m Mop) IsWrite() bool { return m.Fn == FnAppend || m.Fn == FnWrite }

// String is m in the JSON form, e.g. ["r",7,[1,2]].
func (m Mop) String() string { return string(m.AppendJSON(nil)) }

// Op is one completed operation: a transaction with its times and values.
// Its JSON form is described in the package comment.
type Op struct {
	Index      int    `json:"index"`
	Process    int    `json:"process"`
	Node       string `json:"node"`
	Type       Type   `json:"type"`
	F          string `json:"f"`
	InvokeNs   int64  `json:"invoke_ns"`
	CompleteNs int64  `json:"complete_ns"`
	// CommitNs is when the COMMIT was sent (the lag probe's origin: a
	// change's lag counts from it), on the same clock; 0 when not known
	// (a read-only or autocommit operation, one that failed before its
	// COMMIT, a history written before it was recorded).
	CommitNs int64  `json:"commit_ns,omitempty"`
	TxnType  string `json:"txn_type"`
	Value    []Mop  `json:"value"`
	Error    string `json:"error,omitempty"`
}

// FTxn is the f of every transaction.
const FTxn = "txn"

// String is the op's micro-operations in a terminal's short form, e.g.
// [append 5 12] [r 7 [1 2]].
func (op Op) String() string { return MopsText(op.Value) }

// MopsText writes micro-operations the way a person reads them:
// [append 5 12] [r 7 [1 2]] [w 3 4] [r 3 nil].
func MopsText(ms []Mop) string {
	var b strings.Builder
	for i, m := range ms {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteByte('[')
		b.WriteString(m.Fn.String())
		b.WriteByte(' ')
		b.WriteString(strconv.FormatInt(m.Key, 10))
		b.WriteByte(' ')
		switch {
		case m.Fn != FnRead:
			b.WriteString(strconv.FormatInt(m.Value, 10))
		case m.Got == GotValue:
			b.WriteString(strconv.FormatInt(m.Value, 10))
		case m.Got == GotList:
			b.WriteString(ListText(m.List))
		default:
			b.WriteString("nil")
		}
		b.WriteByte(']')
	}
	return b.String()
}

// ListText is a list as [1 2 3].
func ListText(l []int64) string {
	b := make([]byte, 0, 2+len(l)*4)
	b = append(b, '[')
	for i, v := range l {
		if i > 0 {
			b = append(b, ' ')
		}
		b = strconv.AppendInt(b, v, 10)
	}
	return string(append(b, ']'))
}

// Validate checks what the JSON form requires of one operation: a known
// type, an f, times in order and well-formed micro-operations. Reader calls
// it on every line.
func (op *Op) Validate() error {
	if !op.Type.Valid() {
		return fmt.Errorf("type %q: want ok, fail or info", op.Type)
	}
	if op.F == "" {
		return fmt.Errorf(`no "f" (want "txn")`)
	}
	if op.Index < 0 {
		return fmt.Errorf("index %d is negative", op.Index)
	}
	if op.CompleteNs < op.InvokeNs {
		return fmt.Errorf("complete_ns %d is before invoke_ns %d", op.CompleteNs, op.InvokeNs)
	}
	if op.CommitNs != 0 && (op.CommitNs < op.InvokeNs || op.CommitNs > op.CompleteNs) {
		return fmt.Errorf("commit_ns %d is outside invoke_ns %d … complete_ns %d", op.CommitNs, op.InvokeNs, op.CompleteNs)
	}
	for i, m := range op.Value {
		switch m.Fn {
		case FnAppend, FnWrite:
			if m.Got != GotNull || m.List != nil {
				return fmt.Errorf("value[%d]: %s carries a read result", i, m.Fn)
			}
		case FnRead:
			if m.Got > GotList {
				return fmt.Errorf("value[%d]: unknown read result %d", i, m.Got)
			}
		default:
			return fmt.Errorf("value[%d]: unknown function %d", i, m.Fn)
		}
	}
	return nil
}
