package orderentry

import (
	"math/rand/v2"
	"strings"
	"time"

	"replab/internal/workload/gendata"
)

// Every loaded row is a function of (seed, table, owner id): an owner's
// rows (a customer's addresses, a product's inventories) come from a PCG
// stream seeded with those three, and how many rows an owner has in a
// table from a hash of them, so TotalRows needs no generation and tables
// load in any order. Orders and their items share one stream per
// customer, so that an order's total is the sum of its items.

// gen makes rows; one per loading goroutine.
type gen struct {
	*gendata.Gen
	w *Workload
}

func newGen(w *Workload) *gen { return &gen{Gen: gendata.New(w.seed), w: w} }

// hash is a well-mixed 64-bit function of (seed, salt, id).
func (w *Workload) hash(salt uint64, id int64) uint64 { return gendata.Hash(w.seed, salt, id) }

// between is lo..hi from a hash of (seed, salt, id).
func (w *Workload) between(salt uint64, id int64, lo, hi int) int {
	return gendata.Between(w.seed, salt, id, lo, hi)
}

// salt names a stream.
func salt(name string) uint64 { return gendata.Salt(name) }

// today is the data's fixed "now".
var today = gendata.Today

// secondsIn is a time in the n days before t, to the second.
func secondsIn(r *rand.Rand, t time.Time, days int) time.Time {
	return t.Add(-time.Duration(r.Int64N(int64(days)*86400)) * time.Second)
}

// dayIn is a date from..from+days.
func dayIn(r *rand.Rand, from time.Time, days int) time.Time {
	return from.AddDate(0, 0, r.IntN(days+1))
}

const (
	letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	lower   = "abcdefghijklmnopqrstuvwxyz"
	digits  = "0123456789"
)

// name is a capitalised random word of lo..hi letters.
func name(r *rand.Rand, lo, hi int) string {
	n := lo + r.IntN(hi-lo+1)
	b := make([]byte, n)
	b[0] = letters[r.IntN(len(letters))]
	for i := 1; i < n; i++ {
		b[i] = lower[r.IntN(len(lower))]
	}
	return string(b)
}

// code is n characters from set.
func code(r *rand.Rand, set string, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = set[r.IntN(len(set))]
	}
	return string(b)
}

// one is one of the choices.
func one(r *rand.Rand, choices ...string) string { return choices[r.IntN(len(choices))] }

// words is a phrase of lo..hi random words, at most max characters.
func words(r *rand.Rand, lo, hi, max int) string {
	n := lo + r.IntN(hi-lo+1)
	var b strings.Builder
	for i := 0; i < n; i++ {
		w := strings.ToLower(name(r, 2, 10))
		if b.Len()+len(w)+1 > max {
			break
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(w)
	}
	return b.String()
}

// money is cents as the value of a numeric(…, 2) column.
func money(cents int64) float64 { return float64(cents) / 100 }
