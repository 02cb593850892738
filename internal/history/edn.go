package history

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strconv"
)

// ToJepsenEDN writes ops as a Jepsen history in EDN, one map per line, the
// form elle-cli reads: each operation becomes an :invoke and its completion
// (:ok, :fail or :info), and the events are interleaved in time order, so
// the history's order is the real-time order (Elle's real-time and process
// orders are inferred from the positions):
//
//	{:type :invoke, :f :txn, :value [[:append 5 12] [:r 7 nil]], :process 3, :time 0, :index 0, :node "eu"}
//	{:type :ok, :f :txn, :value [[:append 5 12] [:r 7 [1 2]]], :process 3, :time 350000, :index 1, :node "eu"}
//
// :time is nanoseconds since the earliest invocation; :index is the
// event's position. An invocation's reads are nil; a fail or info
// completion repeats the invocation's value (Jepsen's convention: nothing
// was observed); an ok completion carries the values read. :error is the
// error code, as a string. Events at the same nanosecond are ordered
// completions first (so a process's next invocation never precedes its
// previous completion), then by index.
func ToJepsenEDN(w io.Writer, ops []Op) error {
	type event struct {
		t        int64 // twice the time, +1 for the completion of an op that took no time
		complete bool
		op       int
	}
	evs := make([]event, 0, 2*len(ops))
	var t0 int64
	for i := range ops {
		if i == 0 || ops[i].InvokeNs < t0 {
			t0 = ops[i].InvokeNs
		}
		c := 2 * ops[i].CompleteNs
		if ops[i].CompleteNs <= ops[i].InvokeNs {
			c = 2*ops[i].InvokeNs + 1
		}
		evs = append(evs, event{2 * ops[i].InvokeNs, false, i}, event{c, true, i})
	}
	sort.Slice(evs, func(i, j int) bool {
		a, b := evs[i], evs[j]
		if a.t != b.t {
			return a.t < b.t
		}
		if a.complete != b.complete {
			return a.complete
		}
		if ops[a.op].Index != ops[b.op].Index {
			return ops[a.op].Index < ops[b.op].Index
		}
		return a.op < b.op
	})
	bw := bufio.NewWriter(w)
	var b []byte
	for idx, e := range evs {
		op := &ops[e.op]
		b = b[:0]
		typ := "invoke"
		if e.complete {
			typ = string(op.Type)
		}
		b = append(b, "{:type :"...)
		b = append(b, typ...)
		b = append(b, ", :f :"...)
		b = append(b, op.F...)
		b = append(b, ", :value ["...)
		observed := e.complete && op.Type == OK
		for i, m := range op.Value {
			if i > 0 {
				b = append(b, ' ')
			}
			b = appendEDNMop(b, m, observed)
		}
		b = append(b, "], :process "...)
		b = strconv.AppendInt(b, int64(op.Process), 10)
		b = append(b, ", :time "...)
		b = strconv.AppendInt(b, e.t/2-t0, 10)
		b = append(b, ", :index "...)
		b = strconv.AppendInt(b, int64(idx), 10)
		if op.Node != "" {
			b = append(b, ", :node "...)
			b = appendString(b, op.Node) // JSON string escapes are EDN's too
		}
		if e.complete && op.Error != "" {
			b = append(b, ", :error "...)
			b = appendString(b, op.Error)
		}
		b = append(b, "}\n"...)
		if _, err := bw.Write(b); err != nil {
			return fmt.Errorf("write EDN history: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write EDN history: %w", err)
	}
	return nil
}

// appendEDNMop writes [:append 5 12], [:w 3 4], [:r 7 [1 2]] or [:r 7 nil];
// a read's value only when observed.
func appendEDNMop(b []byte, m Mop, observed bool) []byte {
	b = append(b, '[', ':')
	b = append(b, m.Fn.String()...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, m.Key, 10)
	b = append(b, ' ')
	switch {
	case m.Fn != FnRead:
		b = strconv.AppendInt(b, m.Value, 10)
	case observed && m.Got == GotValue:
		b = strconv.AppendInt(b, m.Value, 10)
	case observed && m.Got == GotList:
		b = append(b, '[')
		for i, v := range m.List {
			if i > 0 {
				b = append(b, ' ')
			}
			b = strconv.AppendInt(b, v, 10)
		}
		b = append(b, ']')
	default:
		b = append(b, "nil"...)
	}
	return append(b, ']')
}
