package check

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"replab/internal/history"
)

// at sets the node of the history's last transaction, and its COMMIT sent
// (ms, 0: unknown).
func (h hist) at(node string, commitMs float64) hist {
	h[len(h)-1].Node = node
	h[len(h)-1].CommitNs = int64(commitMs * 1e6)
	return h
}

func TestStaleReads(t *testing.T) {
	t.Parallel()
	type want struct {
		reads, afterWrite, stale, own, ryw, mono, monoViol int64
		stalenessMs                                        []float64 // of the listed stale reads, in order
	}
	cases := []struct {
		name string
		h    hist
		want want // at node "r"
	}{
		{name: "a list read after the append was acknowledged, without it, is stale",
			h:    hist{}.ok(0, 0, 10, ap(1, 10)).at("p", 9).ok(1, 20, 21, rl(1)).at("r", 0),
			want: want{reads: 1, afterWrite: 1, stale: 1, stalenessMs: []float64{10}}},
		{name: "a list read that shows the append is not stale",
			h:    hist{}.ok(0, 0, 10, ap(1, 10)).at("p", 9).ok(1, 20, 21, rl(1, 10)).at("r", 0),
			want: want{reads: 1, afterWrite: 1}},
		{name: "a read that began before the acknowledgement cannot be stale",
			h:    hist{}.ok(0, 0, 10, ap(1, 10)).at("p", 9).ok(1, 5, 21, rl(1)).at("r", 0),
			want: want{reads: 1}},
		{name: "a failed or unknown write is not acknowledged",
			h: hist{}.tx(0, fail, 0, 10, ap(1, 10)).at("p", 9).tx(2, info, 0, 10, ap(1, 11)).at("p", 0).
				ok(1, 20, 21, rl(1)).at("r", 0),
			want: want{reads: 1}},
		{name: "staleness counts from the oldest write missed",
			h: hist{}.ok(0, 0, 10, ap(1, 10)).at("p", 9).ok(0, 11, 15, ap(1, 11)).at("p", 14).
				ok(1, 30, 31, rl(1)).at("r", 0),
			want: want{reads: 1, afterWrite: 1, stale: 1, stalenessMs: []float64{20}}},
		{name: "missing one's own append breaks read-your-writes",
			h: hist{}.ok(0, 0, 10, ap(1, 10)).at("p", 9).ok(0, 12, 13, rl(1)).at("r", 0).
				ok(0, 14, 15, rl(1, 10)).at("r", 0),
			want: want{reads: 2, afterWrite: 2, stale: 1, own: 2, ryw: 1, mono: 1, stalenessMs: []float64{2}}},
		{name: "a shorter list than the process read before breaks monotonic reads",
			h: hist{}.ok(0, 0, 10, ap(1, 10)).at("p", 9).ok(1, 12, 13, rl(1, 10)).at("r", 0).
				ok(1, 14, 15, rl(1)).at("r", 0),
			want: want{reads: 2, afterWrite: 2, stale: 1, mono: 1, monoViol: 1, stalenessMs: []float64{4}}},
		{name: "a read after its own append in the same transaction is not counted",
			h:    hist{}.ok(0, 0, 10, ap(1, 10)).at("p", 9).ok(1, 12, 13, ap(1, 11), rl(1, 10, 11)).at("r", 0),
			want: want{}},
		{name: "a register read of nil after an acknowledged write is stale",
			h:    hist{}.ok(0, 0, 10, wr(1, 5)).at("p", 9).ok(1, 20, 21, rnil(1)).at("r", 0),
			want: want{reads: 1, afterWrite: 1, stale: 1, stalenessMs: []float64{10}}},
		{name: "a register read of a version overwritten after it was acknowledged is stale",
			h: hist{}.ok(0, 0, 10, wr(1, 5)).at("p", 9).ok(0, 11, 20, wr(1, 6)).at("p", 19).
				ok(1, 25, 26, rv(1, 5)).at("r", 0),
			want: want{reads: 1, afterWrite: 1, stale: 1, stalenessMs: []float64{5}}},
		{name: "a register read of a version concurrent with the later write is not counted",
			h: hist{}.ok(0, 0, 10, wr(1, 5)).at("p", 9).ok(2, 5, 20, wr(1, 6)).at("p", 19).
				ok(1, 25, 26, rv(1, 5)).at("r", 0),
			want: want{reads: 1, afterWrite: 1}},
		{name: "an older register version than the process read before breaks monotonic reads",
			h: hist{}.ok(0, 0, 10, wr(1, 5)).at("p", 9).ok(0, 11, 20, wr(1, 6)).at("p", 19).
				ok(1, 25, 26, rv(1, 6)).at("r", 0).ok(1, 27, 28, rv(1, 5)).at("r", 0),
			want: want{reads: 2, afterWrite: 2, stale: 1, mono: 1, monoViol: 1, stalenessMs: []float64{7}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			res := StaleReads(c.h, StaleOptions{})
			var got want
			if ns := res.Nodes["r"]; ns != nil {
				got = want{reads: ns.Reads, afterWrite: ns.AfterWrite, stale: ns.Stale, own: ns.OwnReads, ryw: ns.RYWViolations,
					mono: ns.MonotonicReads, monoViol: ns.MonotonicViolations}
			}
			for _, r := range res.Reads {
				got.stalenessMs = append(got.stalenessMs, float64(r.StalenessNs)/1e6)
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("got  %+v\nwant %+v", got, c.want)
			}
			if ns := res.Nodes["p"]; ns != nil && ns.Stale > 0 {
				t.Errorf("the writer's node has %d stale reads", ns.Stale)
			}
		})
	}
}

func TestStaleReadsWindowAndSeconds(t *testing.T) {
	t.Parallel()
	h := hist{}.ok(0, 0, 10, ap(1, 10)).at("p", 9).
		ok(1, 500, 501, rl(1)).at("r", 0).      // before the window
		ok(1, 1500, 1501, rl(1)).at("r", 0).    // second 2
		ok(1, 2500, 2501, rl(1, 10)).at("r", 0) // second 3, fresh
	res := StaleReads(h, StaleOptions{From: 1e9, To: 3e9, Origin: 1})
	ns := res.Nodes["r"]
	if ns == nil || ns.Reads != 2 || ns.Stale != 1 || ns.MonotonicReads != 2 || ns.MonotonicViolations != 0 {
		t.Fatalf("got %+v", ns)
	}
	if len(res.Reads) != 1 || res.Reads[0].Second != 2 {
		t.Fatalf("stale reads %+v, want one in second 2", res.Reads)
	}
}

// TestStaleReadsGolden pins the JSON of a small history's result, its
// prediction included.
func TestStaleReadsGolden(t *testing.T) {
	t.Parallel()
	h := hist{}
	// A writer at p appends to key 1 every 10 ms, acknowledged 1 ms after
	// its COMMIT is sent; a reader at r reads key 1 every 10 ms, 3 ms after
	// each acknowledgement; the replica applies each append 5 ms after its
	// COMMIT was sent, so every read misses the append acknowledged 3 ms
	// before it and sees the one before.
	var seen []int64
	for i := range 20 {
		base := float64(i * 10)
		h = h.ok(0, base, base+2, ap(1, int64(i+1))).at("p", base+1)
		h = h.ok(1, base+5, base+6, rl(1, seen...)).at("r", 0)
		seen = append(seen, int64(i+1))
	}
	lag := NewWeighted([]int64{5e6}, nil)
	res := StaleReads(h, StaleOptions{Lag: map[string]LagDist{"r": lag}})
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "stale-reads.json", append(b, '\n'))
	ns := res.Nodes["r"]
	if ns.Stale != 20 || ns.Predicted == nil || ns.Predicted.Share != 1 || !ns.Predicted.Agree {
		t.Errorf("stale %d, prediction %+v: want 20 and a share of 1 that agrees", ns.Stale, ns.Predicted)
	}
}

func TestWeighted(t *testing.T) {
	t.Parallel()
	d := NewWeighted([]int64{30, 10, 20, 20}, []int64{1, 2, 1, 0})
	cases := []struct {
		ns   int64
		want float64
	}{{0, 1}, {9, 1}, {10, 0.5}, {19, 0.5}, {20, 0.25}, {29, 0.25}, {30, 0}, {99, 0}}
	for _, c := range cases {
		if got := d.Exceeds(c.ns); got != c.want {
			t.Errorf("Exceeds(%d) = %v, want %v", c.ns, got, c.want)
		}
	}
	if d.Samples() != 4 {
		t.Errorf("Samples = %d, want 4", d.Samples())
	}
	for q, want := range map[float64]int64{0: 10, 0.5: 10, 0.51: 20, 0.75: 20, 0.76: 30, 1: 30} {
		if got := d.Quantile(q); got != want {
			t.Errorf("Quantile(%v) = %d, want %d", q, got, want)
		}
	}
	if s := Shifted(d, 5); s.Exceeds(5) != d.Exceeds(10) || s.Quantile(1) != 25 || s.Samples() != 4 {
		t.Error("a distribution shifted by 5 is not the same less 5")
	}
	if e := NewWeighted(nil, nil); e.Exceeds(5) != 0 || e.Quantile(0.5) != 0 {
		t.Error("an empty distribution predicts something")
	}
}

func TestPredict(t *testing.T) {
	t.Parallel()
	// Lags uniform on 1 … 100 ms.
	var lags []int64
	for i := int64(1); i <= 100; i++ {
		lags = append(lags, i*1e6)
	}
	lag := NewWeighted(lags, nil)
	cases := []struct {
		name                string
		gapsCommit, gapsAck []int64
		reads, stale        int64
		share, shareFromAck float64
		agree               bool
	}{
		{name: "every gap of 50 ms: half the lags exceed it",
			gapsCommit: []int64{50e6, 50e6}, gapsAck: []int64{50e6, 50e6}, reads: 2, stale: 1, share: 0.5, shareFromAck: 0.5, agree: true},
		{name: "reads with no write before them count as never stale",
			gapsCommit: []int64{50e6, 50e6}, gapsAck: []int64{50e6, 50e6}, reads: 4, stale: 1, share: 0.25, shareFromAck: 0.25, agree: true},
		{name: "gaps from the COMMIT sent are longer than from the ack",
			gapsCommit: []int64{90e6}, gapsAck: []int64{10e6}, reads: 1, stale: 0, share: 0.1, shareFromAck: 0.9, agree: true},
		{name: "far more stale reads than the lag allows disagree",
			gapsCommit: repeat(95e6, 1000), gapsAck: repeat(95e6, 1000), reads: 1000, stale: 500, share: 0.05, shareFromAck: 0.05},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := Predict(lag, c.gapsCommit, c.gapsAck, nil, c.reads, c.stale, 0.999)
			if p.Share != c.share || p.ShareFromAck != c.shareFromAck || p.Agree != c.agree {
				t.Errorf("share %v from ack %v agree %v; want %v, %v, %v (%+v)", p.Share, p.ShareFromAck, p.Agree, c.share, c.shareFromAck, c.agree, p)
			}
		})
	}
}

func repeat(v int64, n int) []int64 {
	s := make([]int64, n)
	for i := range s {
		s[i] = v
	}
	return s
}

func TestSafeWindow(t *testing.T) {
	t.Parallel()
	var lags []int64
	for i := int64(1); i <= 1000; i++ {
		lags = append(lags, i*1e6) // 1 … 1000 ms
	}
	lag := NewWeighted(lags, nil)
	cases := []struct {
		name    string
		offsets []int64
		safe    float64
		wantMs  float64
	}{
		{name: "no offset: the lag's 99.9th percentile", safe: 0.999, wantMs: 999},
		{name: "99 %", safe: 0.99, wantMs: 990},
		{name: "an ack 100 ms after the COMMIT leaves 100 ms less to wait", offsets: []int64{100e6}, safe: 0.999, wantMs: 899},
		{name: "a lag shorter than the ack's return: no wait", offsets: []int64{2000e6}, safe: 0.999, wantMs: 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := float64(SafeWindow(lag, c.offsets, c.safe)) / 1e6
			if math.Abs(got-c.wantMs) > 0.011 {
				t.Errorf("SafeWindow = %.3f ms, want %.3f", got, c.wantMs)
			}
		})
	}
}

// TestPredictionMatchesASimulatedReplica: a replica whose lags are drawn
// from a distribution, reads at random gaps after writes: the measured
// stale share and the prediction from the same lags agree.
func TestPredictionMatchesASimulatedReplica(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	h := hist{}
	var lags []int64
	type write struct{ sent, ack, visible, v int64 }
	var ws []write
	tNs := int64(0)
	for i := range 3000 {
		tNs += int64(r.IntN(20e6)) + 1e6
		lag := int64(20e6 + r.ExpFloat64()*10e6)
		w := write{sent: tNs, ack: tNs + 1e6, visible: tNs + lag, v: int64(i + 1)}
		ws = append(ws, w)
		lags = append(lags, lag)
		h = append(h, history.Op{Index: len(h), Process: 0, Node: "p", Type: ok, F: history.FTxn, InvokeNs: w.sent - 1e6, CompleteNs: w.ack, CommitNs: w.sent, Value: []history.Mop{ap(1, w.v)}})
		read := w.ack + int64(r.IntN(60e6))
		var l []int64
		for _, x := range ws {
			if x.visible <= read {
				l = append(l, x.v)
			}
		}
		// The replica applies in order: a prefix.
		for j := range l {
			if l[j] != int64(j+1) {
				l = l[:j]
				break
			}
		}
		if l == nil {
			l = []int64{}
		}
		h = append(h, history.Op{Index: len(h), Process: 1, Node: "r", Type: ok, F: history.FTxn, InvokeNs: read, CompleteNs: read + 1e5, Value: []history.Mop{rl(1, l...)}})
	}
	// History order is completion order.
	sortOps(h)
	res := StaleReads(h, StaleOptions{Lag: map[string]LagDist{"r": NewWeighted(lags, nil)}})
	ns := res.Nodes["r"]
	if ns == nil || ns.Predicted == nil {
		t.Fatal("no prediction")
	}
	if !ns.Predicted.Agree || ns.Stale < 100 {
		t.Errorf("measured %d stale of %d (%.4f), predicted %.4f ± %.4f: want agreement", ns.Stale, ns.Reads, ns.StaleShare, ns.Predicted.Share, ns.Predicted.Tolerance)
	}
	if ns.Predicted.ShareFromAck <= ns.Predicted.Share {
		t.Errorf("from the ack %.4f, from the COMMIT %.4f: the ack's gap is shorter, so it predicts more", ns.Predicted.ShareFromAck, ns.Predicted.Share)
	}
	if maxLag := float64(NewWeighted(lags, nil).Quantile(1)) / 1e6; ns.StalenessMs.Max >= maxLag {
		t.Errorf("staleness %+v: no read can be staler than the longest lag", ns.StalenessMs)
	}
}

func sortOps(h hist) {
	for i := 1; i < len(h); i++ {
		for j := i; j > 0 && h[j].CompleteNs < h[j-1].CompleteNs; j-- {
			h[j], h[j-1] = h[j-1], h[j]
		}
	}
	for i := range h {
		h[i].Index = i
	}
}

// TestPredictionLeavesOutAMastersOwnWrites: at a master, a read of a key
// last written there has it whatever the lag: the prediction counts it as
// never stale; a read of a key last written at the other master counts.
func TestPredictionLeavesOutAMastersOwnWrites(t *testing.T) {
	t.Parallel()
	h := hist{}.ok(0, 0, 10, ap(1, 10)).at("a", 9).ok(1, 0, 10, ap(2, 20)).at("b", 9).
		ok(2, 20, 21, rl(1, 10), rl(2)).at("a", 0)
	res := StaleReads(h, StaleOptions{Lag: map[string]LagDist{"a": NewWeighted([]int64{100e6}, nil)}})
	a := res.Nodes["a"]
	if a.Reads != 2 || a.AfterWrite != 2 || a.Stale != 1 || a.GapMs.Count != 1 || a.Predicted == nil || a.Predicted.Share != 0.5 {
		t.Errorf("at a: %+v, predicted %+v; want 2 reads, 1 stale, 1 gap (the other master's write), a predicted share of 0.5", a, a.Predicted)
	}
}

func TestStaleReadsByGroup(t *testing.T) {
	t.Parallel()
	h := hist{}.ok(0, 0, 10, ap(1, 10)).at("p", 9).
		ok(1, 20, 21, rl(1)).at("r", 0).     // group east: stale
		ok(2, 20, 21, rl(1, 10)).at("r", 0). // group west: fresh
		ok(3, 22, 23, rl(1, 10)).at("p", 0)  // group west
	group := map[int]string{0: "east", 1: "east", 2: "west", 3: "west"}
	res := StaleReads(h, StaleOptions{GroupOf: func(p int) string { return group[p] }})
	e, w := res.Groups["east"], res.Groups["west"]
	if e == nil || w == nil || e.Reads != 1 || e.Stale != 1 || w.Reads != 2 || w.Stale != 0 || e.Predicted != nil {
		t.Errorf("east %+v\nwest %+v", e, w)
	}
}

// TestPredictionBandHoldsAnInstrumentsOvershoot: commits that return only
// once the replica applied them (remote_apply) leave no stale read; a
// probe whose lags overshoot by up to 3 ms still predicts some for reads
// right after the ack, and the band (lags less their slack) says that
// none is within what it knows.
func TestPredictionBandHoldsAnInstrumentsOvershoot(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	h := hist{}
	var lags []int64
	for i := range 500 {
		sent := int64(i+1) * 20e6
		h = append(h, history.Op{Process: 0, Node: "p", Type: ok, F: history.FTxn, InvokeNs: sent - 1e6, CompleteNs: sent + 10e6, CommitNs: sent, Value: []history.Mop{ap(1, int64(i+1))}})
		lags = append(lags, 9e6+r.Int64N(3e6)) // applied 9 ms after the COMMIT, seen up to 3 ms later
		read := sent + 10e6 + r.Int64N(1e6)
		l := make([]int64, i+1)
		for j := range l {
			l[j] = int64(j + 1)
		}
		h = append(h, history.Op{Process: 1, Node: "r", Type: ok, F: history.FTxn, InvokeNs: read, CompleteNs: read + 1e5, Value: []history.Mop{rl(1, l...)}})
	}
	sortOps(h)
	res := StaleReads(h, StaleOptions{Lag: map[string]LagDist{"r": NewWeighted(lags, nil)}, LagBias: map[string]int64{"r": 1.5e6}, LagSlack: map[string]int64{"r": 3e6}})
	ns := res.Nodes["r"]
	p := ns.Predicted
	if ns.Stale != 0 || p.ShareHigh <= 0 || p.ShareLow != 0 || !p.InBand || !p.Agree {
		t.Errorf("stale %d; predicted %+v: want none stale, some predicted from the raw lags, none from the lags less their slack, and agreement through the band", ns.Stale, p)
	}
}
