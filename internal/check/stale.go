package check

import (
	"math"
	"slices"

	"replab/internal/history"
)

// Stale reads (issue 32): what readers at each node saw of the writes that
// were acknowledged before their reads began. A pure function of the
// history, as Check is: every read of a key in a committed transaction is
// compared with the writes to that key whose COMMIT was answered (an ok
// operation's completion) before the read's transaction was invoked. A
// read that misses one of them is stale; its staleness is how long after
// the oldest write it missed was acknowledged the read began.
//
// For a list a missed write is certain: the read lacks the element. For a
// register it is certain only when the write began after the version read
// had been acknowledged (real time orders them at any one source): a
// write concurrent with the version read is not counted, so a register's
// stale reads are a lower bound.
//
// Beside the share of stale reads, per node: read-your-writes violations
// (the process's own acknowledged write missed) and monotonic-read
// violations (a version older than one the process read of the key before)
// per 10,000 reads, and, given each node's lag distribution, the share of
// stale reads that lag predicts (predict.go).

// StaleOptions say which reads count and what the prediction uses.
type StaleOptions struct {
	// From and To bound the invocations of the reads counted (ns, the
	// history's clock): [From, To). Both 0: every read. Writes count
	// whenever they happened.
	From, To int64
	// Origin is second 0 of StaleRead.Second (the driver's start); 0:
	// the history's first invocation.
	Origin int64
	// Lag is each node's lag distribution (the lag probe's): a node with
	// one gets a prediction. A node without one (the source) gets none.
	Lag map[string]LagDist
	// LagBias is how far each node's lags lie above the truth on average
	// (ns): the probe dates a change at the end of the first poll that
	// sees it, half an interval plus a poll late on average. The
	// prediction compares gaps with lags less this.
	LagBias map[string]int64
	// LagSlack is how far above the truth a node's lag can lie (ns): an
	// interval and a poll at their worst (the probe's p99s). The band
	// [Prediction.ShareLow, ShareHigh] takes every lag less this, and
	// every lag as measured.
	LagSlack map[string]int64
	// GroupOf names the group of the process that read (a [[client]]
	// group), for StaleResult.Groups; nil or "": none.
	GroupOf func(process int) string
	// MaxListed bounds StaleResult.Reads; 0 means DefaultMaxListed.
	MaxListed int
	// SafeShare is the share of reads that must see a write for the
	// prediction's safe window (0 means DefaultSafeShare, 99.9 %).
	SafeShare float64
}

// Defaults of StaleOptions.
const (
	DefaultMaxListed = 200_000
	DefaultSafeShare = 0.999
)

// StaleResult is what readers saw, node by node.
type StaleResult struct {
	// Nodes has one entry per node that served a counted read.
	Nodes map[string]*NodeStale `json:"nodes"`
	// Groups has one per group of readers (StaleOptions.GroupOf), without
	// predictions (a group may read at several nodes).
	Groups map[string]*NodeStale `json:"groups,omitempty"`
	// Reads lists every stale read (up to MaxListed), in the order their
	// transactions completed; Unlisted counts those left out.
	Reads    []StaleRead `json:"-"`
	Unlisted int         `json:"unlisted,omitempty"`
}

// NodeStale is one node's reads. Reads are key reads: each first read of a
// key in a committed transaction, before the transaction wrote it.
type NodeStale struct {
	// ReadTxns: committed transactions with at least one counted read.
	ReadTxns int64 `json:"read_txns"`
	// Reads: key reads; AfterWrite: of them, reads of a key some write to
	// which was acknowledged before the read began (the others cannot be
	// stale).
	Reads      int64 `json:"reads"`
	AfterWrite int64 `json:"after_write"`
	// Stale reads missed a write acknowledged before they began.
	// StaleShare is Stale/Reads; StaleShareAfterWrite Stale/AfterWrite.
	Stale                int64   `json:"stale"`
	StaleShare           float64 `json:"stale_share"`
	StaleShareAfterWrite float64 `json:"stale_share_after_write"`
	// StaleTxns: read transactions with at least one stale read.
	StaleTxns int64 `json:"stale_txns"`
	// OwnReads: reads of a key the reading process had written before
	// (acknowledged); RYWViolations: of them, reads that missed the
	// process's own write; RYWPer10k: violations per 10,000 reads.
	OwnReads      int64   `json:"own_reads"`
	RYWViolations int64   `json:"ryw_violations"`
	RYWPer10k     float64 `json:"ryw_per_10k"`
	// MonotonicReads: reads of a key the process had read before;
	// MonotonicViolations: of them, reads of a version older than the one
	// the process read before; MonotonicPer10k per 10,000 reads.
	MonotonicReads      int64   `json:"monotonic_reads"`
	MonotonicViolations int64   `json:"monotonic_violations"`
	MonotonicPer10k     float64 `json:"monotonic_per_10k"`
	// StalenessMs: for each stale read, how long after the oldest write
	// it missed was acknowledged the read began.
	StalenessMs Dist `json:"staleness_ms"`
	// GapMs: for every read after a write made at another node, how long
	// after the key's last acknowledged write the read began (what the
	// prediction is taken over; a read whose key was last written at its
	// own node counts as never stale there).
	GapMs Dist `json:"gap_ms"`
	// Predicted: what the node's lag predicts; nil without its lag.
	Predicted *Prediction `json:"predicted,omitempty"`

	gapsCommit []int64 // per read after a write: from the last write's COMMIT sent
	gapsAck    []int64 // from its acknowledgement
	offsets    []int64 // its acknowledgement minus its COMMIT sent
	fromCommit int64   // reads whose gap was measured from a COMMIT sent
	local      int64   // reads whose key's last write was made at this node
	staleness  []int64
}

// StaleRead is one stale read.
type StaleRead struct {
	// Second is the second of the run its transaction began in: the one
	// that ends Second seconds after StaleOptions.Origin.
	Second  int64
	Node    string
	Index   int // the reading operation's index
	Process int
	Key     int64
	// StalenessNs: from the acknowledgement of the oldest write it missed
	// to the read's invocation.
	StalenessNs int64
	// Own: it missed a write of its own process (read-your-writes).
	Own bool
}

// Dist summarises durations, in ms, exactly.
type Dist struct {
	Count int64   `json:"count"`
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
}

// distOf summarises ns (sorted in place).
func distOf(ns []int64) Dist {
	if len(ns) == 0 {
		return Dist{}
	}
	slices.Sort(ns)
	var sum float64
	for _, v := range ns {
		sum += float64(v)
	}
	q := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(ns)))) - 1
		return msOf(ns[min(max(i, 0), len(ns)-1)])
	}
	return Dist{Count: int64(len(ns)), Mean: round3(sum / float64(len(ns)) / 1e6), P50: q(0.5), P90: q(0.9), P99: q(0.99), Max: msOf(ns[len(ns)-1])}
}

func msOf(ns int64) float64 { return round3(float64(ns) / 1e6) }

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

// staleWrite is one write of a key as the stale-read check sees it.
type staleWrite struct {
	value    int64
	process  int
	invoke   int64
	ack      int64 // completion: the acknowledgement of an ok write
	commit   int64 // COMMIT sent; 0 when not known
	acked    bool  // an ok operation's
	opIndex  int
	register bool
	node     string // where it was written
}

// StaleReads finds the stale reads of ops (a history in file order).
func StaleReads(ops []history.Op, opts StaleOptions) *StaleResult {
	if opts.MaxListed <= 0 {
		opts.MaxListed = DefaultMaxListed
	}
	if opts.SafeShare <= 0 || opts.SafeShare >= 1 {
		opts.SafeShare = DefaultSafeShare
	}
	if opts.Origin == 0 {
		for _, op := range ops {
			if opts.Origin == 0 || op.InvokeNs < opts.Origin {
				opts.Origin = op.InvokeNs
			}
		}
	}
	// Every write, by key, acknowledged ones in order of acknowledgement;
	// and the write of each (key, value), for register reads.
	byKey := map[int64][]staleWrite{}
	type kv struct{ k, v int64 }
	writer := map[kv]staleWrite{}
	listKey := map[int64]bool{}
	for i := range ops {
		op := &ops[i]
		if op.Type == history.Fail {
			continue
		}
		for _, m := range op.Value {
			if !m.IsWrite() {
				continue
			}
			w := staleWrite{value: m.Value, process: op.Process, invoke: op.InvokeNs, ack: op.CompleteNs, commit: op.CommitNs,
				acked: op.Type == history.OK, opIndex: op.Index, register: m.Fn == history.FnWrite, node: op.Node}
			writer[kv{m.Key, m.Value}] = w
			if m.Fn == history.FnAppend {
				listKey[m.Key] = true
			}
			if w.acked {
				byKey[m.Key] = append(byKey[m.Key], w)
			}
		}
	}
	for k, ws := range byKey {
		slices.SortStableFunc(ws, func(a, b staleWrite) int { return cmpInt64(a.ack, b.ack) })
		byKey[k] = ws
	}

	res := &StaleResult{Nodes: map[string]*NodeStale{}, Groups: map[string]*NodeStale{}}
	type pk struct {
		p int
		k int64
	}
	// What each process last read of each key: a list's last element
	// (0 with has false: empty), a register's version.
	type seen struct {
		has    bool
		last   int64 // a list's last element, or a register's value
		isNil  bool  // a register read as nil
		regVer staleWrite
		known  bool // regVer is the writer of the value read
	}
	last := map[pk]seen{}
	in := map[int64]struct{}{}
	wrote, readKeys := map[int64]bool{}, map[int64]bool{}
	for i := range ops {
		op := &ops[i]
		if op.Type != history.OK {
			continue
		}
		count := (opts.From == 0 && opts.To == 0) || (op.InvokeNs >= opts.From && op.InvokeNs < opts.To)
		t := op.InvokeNs
		var ns, gs *NodeStale // the node's and the reading process's group's
		clear(wrote)
		clear(readKeys)
		opStale := false
		counted := false
		for _, m := range op.Value {
			if m.IsWrite() {
				wrote[m.Key] = true
				continue
			}
			if m.Fn != history.FnRead || wrote[m.Key] || readKeys[m.Key] {
				continue // an internal read
			}
			readKeys[m.Key] = true
			isList := m.Got == history.GotList
			if !isList && listKey[m.Key] {
				continue // a list read not recorded
			}
			// The version read, for registers.
			var ver staleWrite
			verKnown := false
			if !isList && m.Got == history.GotValue {
				w, ok := writer[kv{m.Key, m.Value}]
				if !ok {
					continue // a garbage read: Check reports it
				}
				ver, verKnown = w, true
			}
			if isList {
				clear(in)
				for _, e := range m.List {
					in[e] = struct{}{}
				}
			}
			// missed reports whether the read lacks w.
			missed := func(w staleWrite) bool {
				if isList {
					_, ok := in[w.value]
					return !ok
				}
				if !w.register {
					return false
				}
				if !verKnown {
					return true // read nil: every write follows it
				}
				return w.value != ver.value && w.invoke > ver.ack
			}
			pkey := pk{op.Process, m.Key}
			prev := last[pkey]
			now := seen{has: true}
			if isList {
				if n := len(m.List); n > 0 {
					now.last = m.List[n-1]
				} else {
					now.has = true
					now.isNil = true
				}
			} else {
				now.isNil = !verKnown
				now.regVer, now.known = ver, verKnown
			}
			last[pkey] = now
			if !count {
				continue
			}
			if ns == nil {
				ns = res.Nodes[op.Node]
				if ns == nil {
					ns = &NodeStale{}
					res.Nodes[op.Node] = ns
				}
				if opts.GroupOf != nil {
					if g := opts.GroupOf(op.Process); g != "" {
						if gs = res.Groups[g]; gs == nil {
							gs = &NodeStale{}
							res.Groups[g] = gs
						}
					}
				}
			}
			counted = true
			ns.Reads++
			if gs != nil {
				gs.Reads++
			}
			// Monotonic reads: against the process's previous read of the
			// key.
			if prev.has {
				ns.MonotonicReads++
				if gs != nil {
					gs.MonotonicReads++
				}
				older := false
				switch {
				case isList:
					if !prev.isNil {
						_, ok := in[prev.last]
						older = !ok
					}
				case !verKnown:
					older = !prev.isNil
				case prev.known:
					older = prev.regVer.invoke > ver.ack
				}
				if older {
					ns.MonotonicViolations++
					if gs != nil {
						gs.MonotonicViolations++
					}
				}
			}
			ws := byKey[m.Key]
			n := sortSearch(len(ws), func(j int) bool { return ws[j].ack >= t })
			if n == 0 {
				continue // nothing acknowledged before it: it cannot be stale
			}
			ns.AfterWrite++
			if gs != nil {
				gs.AfterWrite++
			}
			var oldest int64 = -1
			own, ownMissed := false, false
			lastAck, lastCommit := int64(math.MinInt64), int64(math.MinInt64)
			var lastOffset int64
			lastSent, lastHere := false, false
			for _, w := range ws[:n] {
				if w.ack > lastAck {
					lastAck = w.ack
				}
				c := w.commit
				if c == 0 {
					c = w.ack
				}
				if c > lastCommit {
					lastCommit, lastOffset, lastSent, lastHere = c, w.ack-c, w.commit != 0, w.node == op.Node
				}
				mine := w.process == op.Process
				own = own || mine
				if missed(w) {
					if oldest < 0 || w.ack < oldest {
						oldest = w.ack
					}
					ownMissed = ownMissed || mine
				}
			}
			if lastHere {
				// Written at the node read: it has it, whatever the lag
				// elsewhere (a master reading its own writes).
				ns.local++
			} else {
				ns.gapsAck = append(ns.gapsAck, t-lastAck)
				ns.gapsCommit = append(ns.gapsCommit, t-lastCommit)
				ns.offsets = append(ns.offsets, lastOffset)
				if lastSent {
					ns.fromCommit++
				}
			}
			if own {
				ns.OwnReads++
				if ownMissed {
					ns.RYWViolations++
				}
				if gs != nil {
					gs.OwnReads++
					if ownMissed {
						gs.RYWViolations++
					}
				}
			}
			if oldest < 0 {
				continue
			}
			ns.Stale++
			opStale = true
			ns.staleness = append(ns.staleness, t-oldest)
			if gs != nil {
				gs.Stale++
				gs.staleness = append(gs.staleness, t-oldest)
			}
			if len(res.Reads) < opts.MaxListed {
				res.Reads = append(res.Reads, StaleRead{Second: secondOf(t, opts.Origin), Node: op.Node, Index: op.Index,
					Process: op.Process, Key: m.Key, StalenessNs: t - oldest, Own: ownMissed})
			} else {
				res.Unlisted++
			}
		}
		if counted {
			ns.ReadTxns++
			if opStale {
				ns.StaleTxns++
			}
			if gs != nil {
				gs.ReadTxns++
				if opStale {
					gs.StaleTxns++
				}
			}
		}
	}
	for node, ns := range res.Nodes {
		ns.finish(opts.Lag[node], opts.LagBias[node], opts.LagSlack[node], opts.SafeShare)
	}
	for _, gs := range res.Groups {
		gs.finish(nil, 0, 0, opts.SafeShare)
	}
	return res
}

// finish computes a node's shares, rates, distributions and prediction.
func (ns *NodeStale) finish(lag LagDist, bias, slack int64, safe float64) {
	if ns.Reads > 0 {
		ns.StaleShare = ratio(ns.Stale, ns.Reads)
		ns.RYWPer10k = round3(float64(ns.RYWViolations) * 1e4 / float64(ns.Reads))
		ns.MonotonicPer10k = round3(float64(ns.MonotonicViolations) * 1e4 / float64(ns.Reads))
	}
	if ns.AfterWrite > 0 {
		ns.StaleShareAfterWrite = ratio(ns.Stale, ns.AfterWrite)
	}
	ns.StalenessMs = distOf(ns.staleness)
	ns.GapMs = distOf(slices.Clone(ns.gapsAck))
	if lag != nil && lag.Samples() > 0 {
		ns.Predicted = Predict(Shifted(lag, bias), ns.gapsCommit, ns.gapsAck, ns.offsets, ns.Reads, ns.Stale, safe)
		ns.Predicted.LagBiasMs = msOf(bias)
		ns.Predicted.band(lag, max(slack, bias), ns.gapsCommit, ns.Reads, ns.Stale)
		ns.Predicted.GapsFromCommit = ns.fromCommit
	}
}

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return math.Round(float64(a)/float64(b)*1e6) / 1e6
}

// secondOf is the second that ends s seconds after origin and holds t.
func secondOf(t, origin int64) int64 {
	d := t - origin
	if d <= 0 {
		return 0
	}
	return (d + 1e9 - 1) / 1e9
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// sortSearch is sort.Search.
func sortSearch(n int, f func(int) bool) int {
	lo, hi := 0, n
	for lo < hi {
		h := int(uint(lo+hi) >> 1)
		if !f(h) {
			lo = h + 1
		} else {
			hi = h
		}
	}
	return lo
}
