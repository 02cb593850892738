// Package checkgen makes synthetic list-append histories for the checker's
// tests and benchmarks: users with overlapping transactions run against an
// in-memory store that applies each transaction at one point inside its
// interval, so the history is strictly serializable unless told to serve
// stale reads. Keys rotate so lists stay short, as a real list-append
// workload keeps them.
package checkgen

import (
	"math/rand/v2"
	"sort"

	"replab/internal/history"
)

// Options shape a history; zero fields take the defaults.
type Options struct {
	Txns          int     // transactions (default 100,000)
	Processes     int     // concurrent users (default 16)
	ActiveKeys    int     // keys in use at a time (default 12)
	AppendsPerKey int     // appends before a key retires (default 32)
	MaxMops       int     // micro-operations per transaction, 1..MaxMops (default 4)
	ReadFraction  float64 // share of micro-operations that read (default 0.5)
	FailFraction  float64 // transactions that fail (default 0.01)
	InfoFraction  float64 // transactions whose outcome is unknown (default 0.002)
	// StaleFraction is the share of reads served from an older version
	// (a lagging replica): each makes the history not serializable.
	StaleFraction float64
	Seed          uint64
}

func (o Options) withDefaults() Options {
	if o.Txns <= 0 {
		o.Txns = 100_000
	}
	if o.Processes <= 0 {
		o.Processes = 16
	}
	if o.ActiveKeys <= 0 {
		o.ActiveKeys = 12
	}
	if o.AppendsPerKey <= 0 {
		o.AppendsPerKey = 32
	}
	if o.MaxMops <= 0 {
		o.MaxMops = 4
	}
	if o.ReadFraction == 0 {
		o.ReadFraction = 0.5
	}
	if o.FailFraction == 0 {
		o.FailFraction = 0.01
	}
	if o.InfoFraction == 0 {
		o.InfoFraction = 0.002
	}
	return o
}

// ListAppend returns a list-append history in completion order, indexed.
func ListAppend(o Options) []history.Op { return generate(o, false) }

// Register returns an rw-register history: reads and writes of ActiveKeys
// registers (keys do not rotate; StaleFraction serves a read the key's
// previous value).
func Register(o Options) []history.Op { return generate(o, true) }

func generate(o Options, registers bool) []history.Op {
	o = o.withDefaults()
	rng := rand.New(rand.NewPCG(o.Seed, 0x6c697374))
	type txn struct {
		op     history.Op
		commit int64 // the point it takes effect; -1: never
	}
	txns := make([]txn, 0, o.Txns)
	// Times: each user runs transactions one after another, 0.2–5 ms each
	// with 0–1 ms between them.
	next := make([]int64, o.Processes)
	proc := make([]int, o.Processes) // the process number the user has now
	for u := range proc {
		proc[u] = u
		next[u] = int64(rng.IntN(1_000_000))
	}
	newProc := o.Processes
	for range o.Txns {
		u := 0
		for v := range next {
			if next[v] < next[u] {
				u = v
			}
		}
		inv := next[u]
		dur := 200_000 + int64(rng.IntN(4_800_000))
		t := txn{op: history.Op{Process: proc[u], Node: nodes[u%len(nodes)], Type: history.OK, F: history.FTxn,
			InvokeNs: inv, CompleteNs: inv + dur, TxnType: "append"}}
		t.commit = inv + 1 + rng.Int64N(dur-1)
		switch r := rng.Float64(); {
		case r < o.FailFraction:
			t.op.Type, t.op.Error, t.commit = history.Fail, "40001", -1
		case r < o.FailFraction+o.InfoFraction:
			t.op.Type, t.op.Error = history.Info, "timeout"
			if rng.IntN(2) == 0 {
				t.commit = -1
			}
			proc[u] = newProc // a new connection, a new process
			newProc++
		}
		txns = append(txns, t)
		next[u] = inv + dur + int64(rng.IntN(1_000_000))
	}
	// Apply in commit order; keys and values are chosen then.
	order := make([]int, len(txns))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool {
		ca, cb := txns[order[a]].commit, txns[order[b]].commit
		if ca < 0 || cb < 0 {
			return ca >= 0 && cb < 0 || ca < 0 && cb < 0 && order[a] < order[b]
		}
		return ca < cb
	})
	lists := map[int64][]int64{}
	regs := map[int64][]int64{} // each register's values, oldest first
	base := int64(0)
	value := int64(0)
	for _, i := range order {
		t := &txns[i]
		n := 1 + rng.IntN(o.MaxMops)
		for range n {
			k := base + int64(rng.IntN(o.ActiveKeys))
			if registers {
				k = int64(rng.IntN(o.ActiveKeys))
				vs := regs[k]
				switch {
				case rng.Float64() >= o.ReadFraction:
					value++
					t.op.Value = append(t.op.Value, history.Write(k, value))
					if t.commit >= 0 {
						regs[k] = append(vs, value)
					}
				case t.op.Type != history.OK || len(vs) == 0:
					t.op.Value = append(t.op.Value, history.ReadNull(k))
				case len(vs) > 1 && o.StaleFraction > 0 && rng.Float64() < o.StaleFraction:
					t.op.Value = append(t.op.Value, history.ReadValue(k, vs[len(vs)-2]))
				default:
					t.op.Value = append(t.op.Value, history.ReadValue(k, vs[len(vs)-1]))
				}
				continue
			}
			if rng.Float64() < o.ReadFraction {
				if t.op.Type != history.OK {
					t.op.Value = append(t.op.Value, history.ReadNull(k))
					continue
				}
				l := lists[k]
				if o.StaleFraction > 0 && len(l) > 0 && rng.Float64() < o.StaleFraction {
					l = l[:rng.IntN(len(l))]
				}
				t.op.Value = append(t.op.Value, history.ReadList(k, l[:len(l):len(l)]))
				continue
			}
			value++
			t.op.Value = append(t.op.Value, history.Append(k, value))
			if t.commit >= 0 {
				lists[k] = append(lists[k], value)
			}
		}
		for len(lists[base]) >= o.AppendsPerKey {
			delete(lists, base-int64(o.ActiveKeys)) // long retired: free it
			base++
		}
	}
	ops := make([]history.Op, len(txns))
	for i := range txns {
		ops[i] = txns[i].op
	}
	sort.SliceStable(ops, func(a, b int) bool { return ops[a].CompleteNs < ops[b].CompleteNs })
	for i := range ops {
		ops[i].Index = i
	}
	return ops
}

var nodes = []string{"eu", "us", "asia"}
