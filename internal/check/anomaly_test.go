package check

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"replab/internal/history"
	"replab/internal/testkit"
)

// golden compares got with testdata/name (go test -update rewrites it).
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	testkit.Golden(t, filepath.Join("testdata", name), got)
}

// hist builds a history by hand: each tx is one transaction, with times
// in milliseconds from 0.
type hist []history.Op

func (h hist) tx(p int, typ history.Type, invMs, compMs float64, mops ...history.Mop) hist {
	return append(h, history.Op{Index: len(h), Process: p, Node: []string{"eu", "us", "asia", "au", "sa"}[p%5], Type: typ, F: history.FTxn,
		InvokeNs: int64(invMs * 1e6), CompleteNs: int64(compMs * 1e6), TxnType: "t", Value: mops})
}

func (h hist) ok(p int, invMs, compMs float64, mops ...history.Mop) hist {
	return h.tx(p, history.OK, invMs, compMs, mops...)
}

// Micro-operations, shortly.
func ap(k, v int64) history.Mop { return history.Append(k, v) }
func rl(k int64, vs ...int64) history.Mop {
	if vs == nil {
		vs = []int64{}
	}
	return history.ReadList(k, vs)
}
func wr(k, v int64) history.Mop { return history.Write(k, v) }
func rv(k, v int64) history.Mop { return history.ReadValue(k, v) }
func rnil(k int64) history.Mop  { return history.ReadNull(k) }

var (
	ok   = history.OK
	fail = history.Fail
	info = history.Info
)

// anomalyCase is a history that shows some classes, and a near-identical
// one that shows none.
type anomalyCase struct {
	name    string
	history hist
	want    []string // the classes found, exactly
	without hist     // the same history without the anomaly: valid
}

func anomalyCases() []anomalyCase {
	return []anomalyCase{
		{name: "G0: two transactions append to two keys in opposite orders",
			history: hist{}.ok(0, 0, 10, ap(1, 10), ap(2, 20)).ok(1, 1, 11, ap(1, 11), ap(2, 21)).ok(2, 20, 21, rl(1, 10, 11), rl(2, 21, 20)),
			want:    []string{G0},
			without: hist{}.ok(0, 0, 10, ap(1, 10), ap(2, 20)).ok(1, 1, 11, ap(1, 11), ap(2, 21)).ok(2, 20, 21, rl(1, 10, 11), rl(2, 20, 21))},
		{name: "G1a: a read sees an append of a failed transaction",
			history: hist{}.tx(0, fail, 0, 10, ap(1, 10)).ok(1, 1, 11, rl(1, 10)),
			want:    []string{G1a},
			without: hist{}.ok(0, 0, 10, ap(1, 10)).ok(1, 1, 11, rl(1, 10))},
		{name: "G1a: a register read sees a failed write",
			history: hist{}.tx(0, fail, 0, 10, wr(1, 5)).ok(1, 1, 11, rv(1, 5)),
			want:    []string{G1a},
			without: hist{}.ok(0, 0, 10, wr(1, 5)).ok(1, 1, 11, rv(1, 5))},
		{name: "G1b: a read ends at an append its writer followed with another",
			history: hist{}.ok(0, 0, 10, ap(1, 10), ap(1, 11)).ok(1, 1, 11, rl(1, 10)),
			want:    []string{G1b},
			without: hist{}.ok(0, 0, 10, ap(1, 10), ap(1, 11)).ok(1, 1, 11, rl(1, 10, 11))},
		{name: "G1b: a register read sees a write its writer overwrote",
			history: hist{}.ok(0, 0, 10, wr(1, 5), wr(1, 6)).ok(1, 1, 11, rv(1, 5)),
			want:    []string{G1b},
			without: hist{}.ok(0, 0, 10, wr(1, 5), wr(1, 6)).ok(1, 1, 11, rv(1, 6))},
		{name: "G1c: two transactions each read the other's append",
			history: hist{}.ok(0, 0, 10, ap(1, 10), rl(2, 20)).ok(1, 1, 11, ap(2, 20), rl(1, 10)),
			want:    []string{G1c},
			without: hist{}.ok(0, 0, 10, ap(1, 10), rl(2)).ok(1, 1, 11, ap(2, 20), rl(1, 10))},
		{name: "G-single: read skew, one key read before an append and the other after",
			history: hist{}.ok(0, 0, 10, ap(1, 10), ap(2, 20)).ok(1, 1, 11, rl(1), rl(2, 20)).ok(2, 20, 21, rl(1, 10)),
			want:    []string{GSingle},
			without: hist{}.ok(0, 0, 10, ap(1, 10), ap(2, 20)).ok(1, 1, 11, rl(1, 10), rl(2, 20)).ok(2, 20, 21, rl(1, 10))},
		{name: "G-single: read skew over an append no later read shows",
			history: hist{}.ok(0, 0, 10, ap(1, 10), ap(2, 20)).ok(1, 1, 11, rl(1), rl(2, 20)),
			want:    []string{GSingle},
			without: hist{}.ok(0, 0, 10, ap(1, 10), ap(2, 20)).ok(1, 1, 11, rl(1, 10), rl(2, 20))},
		{name: "G-single: register read skew, nil on one key and the new value on the other",
			history: hist{}.ok(0, 0, 10, wr(1, 1), wr(2, 1)).ok(1, 1, 11, rnil(1), rv(2, 1)),
			want:    []string{GSingle},
			without: hist{}.ok(0, 0, 10, wr(1, 1), wr(2, 1)).ok(1, 1, 11, rv(1, 1), rv(2, 1))},
		{name: "G-nonadjacent: two anti-dependencies separated by reads",
			history: hist{}.ok(0, 0, 50, rl(1), rl(4, 40)).ok(1, 1, 51, ap(1, 10), ap(2, 20)).ok(2, 2, 52, rl(2, 20), rl(3)).ok(3, 3, 53, ap(3, 30), ap(4, 40)).
				ok(4, 100, 101, rl(1, 10), rl(3, 30)),
			want: []string{GNonadjacent},
			without: hist{}.ok(0, 0, 50, rl(1), rl(4)).ok(1, 1, 51, ap(1, 10), ap(2, 20)).ok(2, 2, 52, rl(2, 20), rl(3)).ok(3, 3, 53, ap(3, 30), ap(4, 40)).
				ok(4, 100, 101, rl(1, 10), rl(3, 30))},
		{name: "G2-item: write skew",
			history: hist{}.ok(0, 0, 10, rl(1), ap(2, 20)).ok(1, 1, 11, rl(2), ap(1, 10)).ok(2, 20, 21, rl(1, 10), rl(2, 20)),
			want:    []string{G2Item},
			without: hist{}.ok(0, 0, 10, rl(1), ap(2, 20)).ok(1, 1, 11, rl(2, 20), ap(1, 10)).ok(2, 20, 21, rl(1, 10), rl(2, 20))},

		{name: "G0-process: one process's two appends land in the opposite order",
			history: hist{}.ok(0, 0, 10, ap(1, 10)).ok(0, 20, 30, ap(1, 11)).ok(1, 40, 41, rl(1, 11, 10)),
			want:    []string{G0 + ProcessSuffix, MonotonicWrites},
			without: hist{}.ok(0, 0, 10, ap(1, 10)).ok(0, 20, 30, ap(1, 11)).ok(1, 40, 41, rl(1, 10, 11))},
		{name: "G1c-process: a process reads what it appends later",
			history: hist{}.ok(0, 0, 10, rl(1, 10)).ok(0, 20, 30, ap(1, 10)),
			want:    []string{G1c + ProcessSuffix},
			without: hist{}.ok(0, 0, 10, rl(1)).ok(0, 20, 30, ap(1, 10))},
		{name: "G-single-process: a process does not read its own append",
			history: hist{}.ok(0, 0, 10, ap(1, 10)).ok(0, 20, 30, rl(1)).ok(1, 40, 41, rl(1, 10)),
			want:    []string{GSingle + ProcessSuffix, ReadYourWrites},
			without: hist{}.ok(0, 0, 10, ap(1, 10)).ok(0, 20, 30, rl(1, 10)).ok(1, 40, 41, rl(1, 10))},
		{name: "G-nonadjacent-process: two anti-dependencies closed by process order",
			history: hist{}.ok(3, 0, 5, ap(3, 30)).ok(1, 2, 60, ap(1, 10), ap(2, 20)).ok(2, 1, 70, rl(2, 20), rl(3)).ok(3, 10, 50, rl(1)).
				ok(4, 100, 110, rl(1, 10), rl(3, 30)),
			want: []string{GNonadjacent + ProcessSuffix},
			without: hist{}.ok(3, 0, 5, ap(3, 30)).ok(1, 2, 60, ap(1, 10), ap(2, 20)).ok(2, 1, 70, rl(2, 20), rl(3)).ok(3, 10, 50, rl(1, 10)).
				ok(4, 100, 110, rl(1, 10), rl(3, 30))},
		{name: "G2-item-process: adjacent anti-dependencies closed by process order",
			history: hist{}.ok(0, 0, 5, ap(2, 20)).ok(1, 1, 60, rl(2), ap(1, 10)).ok(0, 10, 50, rl(1)).ok(2, 100, 110, rl(1, 10), rl(2, 20)),
			want:    []string{G2Item + ProcessSuffix},
			without: hist{}.ok(0, 0, 5, ap(2, 20)).ok(1, 1, 60, rl(2), ap(1, 10)).ok(0, 10, 50, rl(1, 10)).ok(2, 100, 110, rl(1, 10), rl(2, 20))},

		{name: "G0-realtime: an append that began after another completed is ordered before it",
			history: hist{}.ok(0, 0, 10, ap(1, 10)).ok(1, 20, 30, ap(1, 11)).ok(2, 40, 41, rl(1, 11, 10)),
			want:    []string{G0 + RealtimeSuffix},
			without: hist{}.ok(0, 0, 10, ap(1, 10)).ok(1, 20, 30, ap(1, 11)).ok(2, 40, 41, rl(1, 10, 11))},
		{name: "G1c-realtime: a read sees an append that began after it completed",
			history: hist{}.ok(0, 0, 10, rl(1, 10)).ok(1, 20, 30, ap(1, 10)),
			want:    []string{G1c + RealtimeSuffix},
			without: hist{}.ok(0, 0, 10, rl(1)).ok(1, 20, 30, ap(1, 10))},
		{name: "G-single-realtime: a stale read after an append completed",
			history: hist{}.ok(0, 0, 10, ap(1, 10)).ok(1, 20, 30, rl(1)).ok(2, 40, 41, rl(1, 10)),
			want:    []string{GSingle + RealtimeSuffix},
			without: hist{}.ok(0, 0, 10, ap(1, 10)).ok(1, 20, 30, rl(1, 10)).ok(2, 40, 41, rl(1, 10))},
		{name: "G-single-realtime: a stale register read after a write completed",
			history: hist{}.ok(0, 0, 10, wr(1, 5)).ok(1, 20, 30, rnil(1)),
			want:    []string{GSingle + RealtimeSuffix},
			without: hist{}.ok(0, 0, 10, wr(1, 5)).ok(1, 20, 30, rv(1, 5))},
		{name: "G0-realtime: registers read 5, then 6, then 5 again while both writes were in flight",
			history: hist{}.ok(0, 0, 100, wr(1, 5)).ok(1, 0, 100, wr(1, 6)).ok(2, 20, 30, rv(1, 5)).ok(3, 40, 50, rv(1, 6)).ok(4, 60, 70, rv(1, 5)),
			want:    []string{G0 + RealtimeSuffix},
			without: hist{}.ok(0, 0, 100, wr(1, 5)).ok(1, 0, 100, wr(1, 6)).ok(2, 20, 30, rv(1, 5)).ok(3, 40, 50, rv(1, 6)).ok(4, 60, 70, rv(1, 6))},
		{name: "G-nonadjacent-realtime: two anti-dependencies closed by real time",
			history: hist{}.ok(3, 0, 5, ap(3, 30)).ok(1, 2, 60, ap(1, 10), ap(2, 20)).ok(2, 1, 70, rl(2, 20), rl(3)).ok(0, 10, 50, rl(1)).
				ok(4, 100, 110, rl(1, 10), rl(3, 30)),
			want: []string{GNonadjacent + RealtimeSuffix},
			without: hist{}.ok(3, 0, 5, ap(3, 30)).ok(1, 2, 60, ap(1, 10), ap(2, 20)).ok(2, 1, 70, rl(2, 20), rl(3)).ok(0, 10, 50, rl(1, 10)).
				ok(4, 100, 110, rl(1, 10), rl(3, 30))},
		{name: "G2-item-realtime: adjacent anti-dependencies closed by real time",
			history: hist{}.ok(2, 0, 5, ap(2, 20)).ok(1, 1, 60, rl(2), ap(1, 10)).ok(0, 10, 50, rl(1)).ok(3, 100, 110, rl(1, 10), rl(2, 20)),
			want:    []string{G2Item + RealtimeSuffix},
			without: hist{}.ok(2, 0, 5, ap(2, 20)).ok(1, 1, 60, rl(2), ap(1, 10)).ok(0, 10, 50, rl(1, 10)).ok(3, 100, 110, rl(1, 10), rl(2, 20))},

		{name: "lost update: two transactions read the same list and append to it",
			history: hist{}.ok(0, 0, 10, rl(1), ap(1, 10)).ok(1, 1, 11, rl(1), ap(1, 11)).ok(2, 20, 21, rl(1, 10, 11)),
			want:    []string{LostUpdate, GSingle},
			without: hist{}.ok(0, 0, 10, rl(1), ap(1, 10)).ok(1, 1, 11, rl(1, 10), ap(1, 11)).ok(2, 20, 21, rl(1, 10, 11))},
		{name: "lost update: two transactions read nil and write the register",
			history: hist{}.ok(0, 0, 10, rnil(1), wr(1, 5)).ok(1, 1, 11, rnil(1), wr(1, 6)),
			want:    []string{LostUpdate, G2Item},
			without: hist{}.ok(0, 0, 10, rnil(1), wr(1, 5)).ok(1, 1, 11, rv(1, 5), wr(1, 6))},
		{name: "dirty update: a committed append follows a failed one",
			history: hist{}.tx(0, fail, 0, 10, ap(1, 10)).ok(1, 1, 11, ap(1, 11)).ok(2, 20, 21, rl(1, 10, 11)),
			want:    []string{G1a, DirtyUpdate},
			without: hist{}.ok(0, 0, 10, ap(1, 10)).ok(1, 1, 11, ap(1, 11)).ok(2, 20, 21, rl(1, 10, 11))},
		{name: "dirty update: a committed register write over a failed one it read",
			history: hist{}.tx(0, fail, 0, 10, wr(1, 5)).ok(1, 1, 11, rv(1, 5), wr(1, 6)),
			want:    []string{G1a, DirtyUpdate},
			without: hist{}.ok(0, 0, 10, wr(1, 5)).ok(1, 1, 11, rv(1, 5), wr(1, 6))},
		{name: "internal: a read misses the transaction's own append",
			history: hist{}.ok(0, 0, 10, ap(1, 10), rl(1)),
			want:    []string{Internal},
			without: hist{}.ok(0, 0, 10, ap(1, 10), rl(1, 10))},
		{name: "internal: a list changes between two reads of one transaction",
			history: hist{}.ok(0, 0, 10, rl(1), rl(1, 11)).ok(1, 1, 9, ap(1, 11)),
			want:    []string{Internal},
			without: hist{}.ok(0, 0, 10, rl(1, 11), rl(1, 11)).ok(1, 1, 9, ap(1, 11))},
		{name: "internal: a register read after the transaction's own write returns another value",
			history: hist{}.ok(0, 0, 10, wr(1, 5), rv(1, 6)).ok(1, 1, 9, wr(1, 6)),
			want:    []string{Internal},
			without: hist{}.ok(0, 0, 10, wr(1, 5), rv(1, 5)).ok(1, 1, 9, wr(1, 6))},
		{name: "duplicate elements: a value read twice in a list",
			history: hist{}.ok(0, 0, 10, ap(1, 10)).ok(1, 20, 30, rl(1, 10, 10)),
			want:    []string{DuplicateElements},
			without: hist{}.ok(0, 0, 10, ap(1, 10)).ok(1, 20, 30, rl(1, 10))},
		{name: "incompatible order: two reads disagree on which append came first",
			history: hist{}.ok(0, 0, 10, ap(1, 10)).ok(1, 0, 10, ap(1, 11)).ok(2, 20, 30, rl(1, 10, 11)).ok(3, 20, 30, rl(1, 11, 10)),
			want:    []string{IncompatibleOrder},
			without: hist{}.ok(0, 0, 10, ap(1, 10)).ok(1, 0, 10, ap(1, 11)).ok(2, 20, 30, rl(1, 10, 11)).ok(3, 20, 30, rl(1, 10, 11))},
		{name: "garbage read: a list holds a value no one appended",
			history: hist{}.ok(0, 0, 10, ap(1, 10)).ok(1, 20, 30, rl(1, 10, 99)),
			want:    []string{GarbageRead},
			without: hist{}.ok(0, 0, 10, ap(1, 10), ap(1, 99)).ok(1, 20, 30, rl(1, 10, 99))},
		{name: "garbage read: a register holds a value no one wrote",
			history: hist{}.ok(0, 0, 10, wr(1, 5)).ok(1, 20, 30, rv(1, 99)),
			want:    []string{GarbageRead},
			without: hist{}.ok(0, 0, 10, wr(1, 5)).ok(1, 20, 30, rv(1, 5))},

		{name: "read-your-writes: a register read returns nil after the process wrote",
			history: hist{}.ok(0, 0, 10, wr(1, 5)).ok(0, 20, 30, rnil(1)),
			want:    []string{ReadYourWrites, GSingle + ProcessSuffix},
			without: hist{}.ok(0, 0, 10, wr(1, 5)).ok(0, 20, 30, rv(1, 5))},
		{name: "monotonic reads: a process reads a shorter list after a longer one",
			history: hist{}.ok(1, 0, 5, ap(1, 10)).ok(0, 10, 20, rl(1, 10)).ok(0, 30, 40, rl(1)),
			want:    []string{MonotonicReads, GSingle + ProcessSuffix},
			without: hist{}.ok(1, 0, 5, ap(1, 10)).ok(0, 10, 20, rl(1, 10)).ok(0, 30, 40, rl(1, 10))},
		{name: "writes-follow-reads: a reader sees a process's append but not what the process read before it",
			history: hist{}.ok(1, 0, 5, ap(1, 10)).ok(0, 10, 20, rl(1, 10)).ok(0, 30, 40, ap(2, 20)).ok(2, 50, 60, rl(2, 20), rl(1)),
			want:    []string{WritesFollowReads, GSingle + ProcessSuffix},
			without: hist{}.ok(1, 0, 5, ap(1, 10)).ok(0, 10, 20, rl(1, 10)).ok(0, 30, 40, ap(2, 20)).ok(2, 50, 60, rl(2, 20), rl(1, 10))},
	}
}

// slug makes a golden file name of a case name.
func slug(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.TrimRight(b.String(), "-")
}

func TestEachAnomalyIsFoundWithItsWitness(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range anomalyCases() {
		t.Run(c.name, func(t *testing.T) {
			res, err := Check(c.history, Options{})
			if err != nil {
				t.Fatal(err)
			}
			var text bytes.Buffer
			if err := res.WriteText(&text, 3); err != nil {
				t.Fatal(err)
			}
			if got := res.Classes(); !sameSet(got, c.want) {
				t.Errorf("found %v, want %v\n%s", got, c.want, text.String())
			}
			for _, cl := range c.want {
				if len(res.Witnesses[cl]) == 0 {
					t.Errorf("%s has no witness", cl)
				}
			}
			golden(t, slug(c.name)+".txt", text.Bytes())
		})
		t.Run(c.name+", without it: valid", func(t *testing.T) {
			res, err := Check(c.without, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !res.Valid() || res.StrongestSatisfied != StrictSerializable || !res.Complete {
				var text bytes.Buffer
				_ = res.WriteText(&text, 3)
				t.Errorf("the history without the anomaly is not valid:\n%s", text.String())
			}
		})
		for _, cl := range c.want {
			seen[cl] = true
		}
	}
	t.Run("every class has a case", func(t *testing.T) {
		for _, cl := range classOrder {
			if !seen[cl] && !strings.HasPrefix(cl, Cycle) {
				t.Errorf("no history shows %s", cl)
			}
		}
	})
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
