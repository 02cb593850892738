package personnel

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
	"slices"
	"time"
	"unsafe"

	"replab/internal/workload/gendata"
)

// Every row is a function of (seed, table, owner id): a table's rows for
// one person (or one reference row) come from a PCG stream seeded with
// those three, and how many rows a person has in a table from a hash of
// them, so TotalRows needs no generation and tables load in any order.

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

func day(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 0, 0, 0, 0, time.UTC) }

func days(a, b time.Time) int { return int(b.Sub(a).Hours() / 24) }

// dateIn is a uniform date in [from, to].
func dateIn(r *rand.Rand, from, to time.Time) time.Time {
	n := days(from, to)
	if n <= 0 {
		return from
	}
	return from.AddDate(0, 0, r.IntN(n+1))
}

var (
	saltBirth = salt("birth")
	saltEntry = salt("entry")
	saltDeps  = salt("dependants")
)

// birth is a person's birth date (1965–2000), shared by every table.
func (w *Workload) birth(id int64) time.Time {
	return day(1965, 1, 1).AddDate(0, 0, w.between(saltBirth, id, 0, days(day(1965, 1, 1), day(2000, 12, 31))))
}

// entry is the day a person entered service: 17 to 24 years after birth.
func (w *Workload) entry(id int64) time.Time {
	return w.birth(id).AddDate(17, 0, w.between(saltEntry, id, 0, 7*365))
}

// dependants are a person's adult (0–2) and minor (0–4) dependants; PER's
// counts and PER_DPNDNT's rows agree.
func (w *Workload) dependants(id int64) (adult, minor int) {
	h := w.hash(saltDeps, id)
	switch a := h % 10; {
	case a < 3:
		adult = 0
	case a < 9:
		adult = 1
	default:
		adult = 2
	}
	return adult, int((h >> 8) % 5)
}

const (
	letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	lower   = "abcdefghijklmnopqrstuvwxyz"
	digits  = "0123456789"
	alnum   = letters + digits
	// textChars are the 64 characters of generated text.
	textChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ."
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

// Text is n ASCII characters (letters, digits, space, full stop), each
// uniform over textChars and independent of the others: what
// PER_DSCRPTN_TEXT holds and the update writes.
//
// The driver makes one per transaction, so its cost is the client's:
// drawing its 40 numbers from r (a PCG behind an interface) and mapping
// them a character at a time took 0.9 µs for 400 characters, a tenth of
// replab run's client CPU per transaction against pipelined pgbench
// (which sends a fixed text). Now r gives one number, the seed of a
// wyrand stream (one multiplication per 64 bits), and each 12 bits
// become two characters through textPairs: 0.35 µs (BenchmarkText).
func Text(r *rand.Rand, n int) string {
	if n <= 0 {
		return ""
	}
	b := AppendText(make([]byte, 0, n+textGroup-1), r, n)
	// b is not used again: the string can have its bytes (a copy showed
	// in the driver's profile).
	return unsafe.String(&b[0], n)
}

// AppendText appends Text(r, n) to b (the same draws from r), for a
// caller that reuses its buffer.
func AppendText(b []byte, r *rand.Rand, n int) []byte {
	if n <= 0 {
		return b
	}
	// Room for a whole last group of 10, so no write needs a bound.
	at := len(b)
	b = slices.Grow(b, n+textGroup-1)[:at+n+textGroup-1]
	s := r.Uint64()
	for i := at; i < at+n; i += textGroup {
		s += wyAdd
		hi, lo := bits.Mul64(s, s^wyXor)
		u := hi ^ lo
		g := b[i : i+textGroup : i+textGroup]
		binary.LittleEndian.PutUint64(g, uint64(textPairs[u&4095])|uint64(textPairs[u>>12&4095])<<16|
			uint64(textPairs[u>>24&4095])<<32|uint64(textPairs[u>>36&4095])<<48)
		binary.LittleEndian.PutUint16(g[8:], textPairs[u>>48&4095])
	}
	return b[:at+n]
}

// textGroup is how many characters one 64-bit number makes (60 bits).
const textGroup = 10

// wyrand's constants (Wang Yi's generator, public domain).
const (
	wyAdd = 0xa0761d6478bd642f
	wyXor = 0xe7037ed1a0b428db
)

// textPairs maps 12 random bits to two characters of textChars, the
// first in the low byte (written little-endian, it comes first).
var textPairs = func() (t [4096]uint16) {
	for i := range t {
		t[i] = uint16(textChars[i&63]) | uint16(textChars[i>>6])<<8
	}
	return t
}()

// words is a phrase of random words, at most max characters.
func words(r *rand.Rand, lo, hi, max int) string {
	n := lo + r.IntN(hi-lo+1)
	b := make([]byte, 0, max)
	for i := 0; i < n; i++ {
		w := name(r, 3, 10)
		if len(b)+len(w)+1 > max {
			break
		}
		if i > 0 {
			b = append(b, ' ')
		}
		b = append(b, w...)
	}
	return string(b)
}
