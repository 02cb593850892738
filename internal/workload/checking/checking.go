// Package checking holds what the workloads made for checking a history
// share (list-append, rw-register): their options, the shape of their
// transactions (1–N micro-operations, each a read or a write of a key),
// the choice of keys (uniform or zipfian among a few active keys, each
// retired after K writes for a fresh one, as Elle does, so that lists stay
// short), unique values, and the session statements that set the
// isolation level. What is SQL is in each workload; nothing here knows a
// database.
package checking

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"replab/internal/engine"
	"replab/internal/history"
	"replab/internal/spec"
	"replab/internal/workload"
)

// Option defaults and bounds.
const (
	DefaultKeys      = 10
	MaxKeys          = 1_000_000
	DefaultMinOps    = 1
	DefaultMaxOps    = 4
	MaxOps           = 100
	DefaultReadShare = 0.5
	DefaultPerKey    = 32
	MaxPerKey        = 100_000
	// ZipfS is the zipfian key choice's exponent: the active key at
	// position i (from 0) is chosen with a probability ∝ 1/(1+i)^ZipfS.
	ZipfS = 1.1
)

// Key distributions.
const (
	Uniform = "uniform"
	Zipfian = "zipfian"
)

// Where read-only transactions run (reads_at).
const (
	AtSource  = "source"
	AtReplica = "replica"
	AtAny     = "any"
)

// Which keys read-only transactions read (read_keys), and what they wait
// for at a replica (read_wait).
const (
	ReadRandom    = "random"
	ReadOwn       = "own"
	WaitNone      = "none"
	WaitOwnWrites = "own-writes"
)

// MaxReadDelay bounds read_delay.
const MaxReadDelay = time.Minute

// Isolation levels, as SQL names them.
const (
	ReadUncommitted = "read uncommitted"
	ReadCommitted   = "read committed"
	RepeatableRead  = "repeatable read"
	Serializable    = "serializable"
)

// Config is a checking workload's options, resolved.
type Config struct {
	Kind           string // the workload's kind, for messages
	Keys           int    // active keys at a time
	MinOps, MaxOps int    // micro-operations per transaction
	ReadShare      float64
	Dist           string // Uniform or Zipfian
	PerKey         int    // writes a key takes before it is retired
	Isolation      string // "" (the server's default) or a level
	SyncWait       int    // Galera's wsrep_sync_wait; -1 when not set
	ReadsAt        string // AtSource, AtReplica or AtAny
	// Reads after writes (issue 32): read-only transactions pause until
	// ReadDelay after their user's last acknowledged write; with ReadKeys
	// "own" they read the keys of that write; with ReadWait "own-writes"
	// those at a replica first wait until it has applied that write.
	ReadDelay time.Duration
	ReadKeys  string // ReadRandom or ReadOwn
	ReadWait  string // WaitNone or WaitOwnWrites
	// ReadBeforeWrite makes every write the second half of a
	// read-modify-write: a transaction reads each key before it first
	// writes it (read_before_write), so that two transactions that
	// overwrite each other's write show as a lost update.
	ReadBeforeWrite bool
	// Stride lays the values out: user u's n-th value (n from 1) is
	// n*Stride + u, so every user's are its own. It is the most users
	// the run has (its search's largest step included).
	Stride int64
	// Dialect is the SQL the workload speaks.
	Dialect engine.Dialect
}

// ReadOptions reads the options every checking workload has (keys,
// ops_per_txn, read_share, key_dist, isolation, sync_wait, reads_at),
// and perKey, the name of its rotation option (appends_per_key,
// writes_per_key). Errors are recorded in o, at their lines.
func ReadOptions(o *workload.Options, kind, perKey string) Config {
	c := Config{Kind: kind, Dialect: o.Dialect, SyncWait: -1}
	c.Keys = int(o.Int("keys", DefaultKeys, 1, MaxKeys))
	lo, hi := o.IntRange("ops_per_txn", DefaultMinOps, DefaultMaxOps, 1, MaxOps)
	c.MinOps, c.MaxOps = int(lo), int(hi)
	c.ReadShare = o.Float("read_share", DefaultReadShare, 0, 1)
	c.Dist = o.String("key_dist", Uniform, Uniform, Zipfian)
	c.PerKey = int(o.Int(perKey, DefaultPerKey, 1, MaxPerKey))
	c.ReadsAt = o.String("reads_at", AtSource, AtSource, AtReplica, AtAny)
	c.ReadDelay = o.Duration("read_delay", 0, 0, MaxReadDelay)
	c.ReadKeys = o.String("read_keys", ReadRandom, ReadRandom, ReadOwn)
	c.ReadWait = o.String("read_wait", WaitNone, WaitNone, WaitOwnWrites)
	if b := o.Bool("read_before_write"); b != nil {
		c.ReadBeforeWrite = *b
	}
	if c.ReadWait == WaitOwnWrites && c.ReadsAt == AtSource && o.Has("read_wait") {
		o.Errorf("read_wait", "read_wait = %q waits at a replica, and reads_at = %q reads at the source: read at a replica (reads_at = \"replica\" or \"any\")", WaitOwnWrites, AtSource)
	}
	c.Isolation = readIsolation(o)
	if o.Has("sync_wait") {
		c.SyncWait = int(o.Int("sync_wait", 0, 0, 15))
		switch {
		case o.Dialect == engine.Postgres:
			o.Errorf("sync_wait", "sync_wait is Galera's wsrep_sync_wait (MariaDB); PostgreSQL has none: leave it out")
		case o.Spec != nil && o.Spec.Scheme.Replication != "galera":
			o.Errorf("sync_wait", "sync_wait is Galera's wsrep_sync_wait: it needs [scheme] replication = \"galera\"")
		}
	}
	if c.ReadShare == 1 {
		o.Errorf("read_share", "with read_share = 1 nothing is ever written, so every read sees nothing: write less than 1")
	}
	c.Stride = int64(1)
	if o.Spec != nil {
		c.Stride = int64(max(o.Spec.Run.Users, 1))
		if sr := o.Spec.Run.Search; sr != nil && sr.By == spec.SearchUsers {
			for _, u := range sr.Steps {
				c.Stride = max(c.Stride, int64(math.Ceil(u)))
			}
		}
	}
	return c
}

// readIsolation reads isolation: a level the dialect has, written with
// spaces, hyphens or underscores ("repeatable read", "repeatable-read").
func readIsolation(o *workload.Options) string {
	if !o.Has("isolation") {
		return ""
	}
	v := o.String("isolation", "")
	if v == "" {
		return "" // not a string (String said so), or the server's default
	}
	level := strings.Join(strings.Fields(strings.NewReplacer("-", " ", "_", " ").Replace(strings.ToLower(v))), " ")
	levels := []string{ReadCommitted, RepeatableRead, Serializable}
	if o.Dialect == engine.MySQL {
		levels = append([]string{ReadUncommitted}, levels...)
	}
	for _, l := range levels {
		if level == l {
			return l
		}
	}
	switch {
	case level == ReadUncommitted && o.Dialect == engine.Postgres:
		o.Errorf("isolation", "PostgreSQL runs read uncommitted as read committed: write %q", ReadCommitted)
	default:
		q := make([]string, len(levels))
		for i, l := range levels {
			q[i] = strconv.Quote(l)
		}
		o.Errorf("isolation", "unknown level %q for %s; choose one of %s", v, o.Dialect, strings.Join(q, ", "))
	}
	return ""
}

// Session is the statements each connection runs first (TxType.Session):
// the isolation level and Galera's wsrep_sync_wait, as set.
func (c Config) Session() []string {
	var s []string
	if c.Isolation != "" {
		switch c.Dialect {
		case engine.Postgres:
			s = append(s, "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL "+strings.ToUpper(c.Isolation))
		case engine.MySQL:
			s = append(s, "SET SESSION TRANSACTION ISOLATION LEVEL "+strings.ToUpper(c.Isolation))
		}
	}
	if c.SyncWait >= 0 && c.Dialect == engine.MySQL {
		s = append(s, fmt.Sprintf("SET SESSION wsrep_sync_wait = %d", c.SyncWait))
	}
	return s
}

// ReadOnlyShare is the share of transactions that only read: with n
// micro-operations (uniform from MinOps to MaxOps), each a read with
// probability ReadShare, all n are reads with probability ReadShare^n.
func (c Config) ReadOnlyShare() float64 {
	var p float64
	for n := c.MinOps; n <= c.MaxOps; n++ {
		p += math.Pow(c.ReadShare, float64(n))
	}
	return p / float64(c.MaxOps-c.MinOps+1)
}

// weightScale is what the types' weights add up to.
const weightScale = 10000

// Types are the transaction types, made by mk (name, whether it writes,
// where it runs): "txn" at the source, with at least one write, and
// "read", only reads, where reads_at says — with "any", half of them at
// the source ("read") and half at a replica ("read-replica"). Their
// weights give each the share of transactions it would have among
// transactions drawn as Config says; a type with no share is left out.
func (c Config) Types(mk func(name string, write bool, at string) workload.TxType) []workload.TxType {
	ro := int(math.Round(c.ReadOnlyShare() * weightScale))
	var ts []workload.TxType
	add := func(name string, write bool, at string, weight int) {
		if weight > 0 {
			t := mk(name, write, at)
			t.Weight, t.ReadOnly, t.At = weight, !write, at
			if !write {
				t.ReadDelay = c.ReadDelay
				t.WaitOwnWrites = c.ReadWait == WaitOwnWrites && at == workload.AtReplica
			}
			ts = append(ts, t)
		}
	}
	add("txn", true, workload.AtSource, weightScale-ro)
	switch c.ReadsAt {
	case AtReplica:
		add("read", false, workload.AtReplica, ro)
	case AtAny:
		add("read", false, workload.AtSource, ro-ro/2)
		add("read-replica", false, workload.AtReplica, ro/2)
	default:
		add("read", false, workload.AtSource, ro)
	}
	return ts
}

// Gen draws the transactions: keys, micro-operations and unique values.
// One Gen serves every user of a workload, and every measurement it
// drives (Fresh between them).
type Gen struct {
	cfg Config

	mu    sync.Mutex
	slots []slot // the active keys
	next  int64  // the next fresh key

	users []userGen // by user: each touches only its own
}

type slot struct {
	key    int64
	writes int
}

type userGen struct {
	n    int64      // values given out
	r    *rand.Rand // the stream z draws from
	zipf *rand.Zipf
	// wrote: the keys of the user's last writing transaction drawn
	// (read_keys = "own" reads them).
	wrote []int64
}

// NewGen starts on keys 1 … cfg.Keys.
func NewGen(cfg Config) *Gen {
	g := &Gen{cfg: cfg, slots: make([]slot, cfg.Keys), users: make([]userGen, cfg.Stride)}
	g.next = 1
	g.Fresh()
	return g
}

// Fresh moves every active key to a new one no transaction used before:
// each measurement (a repetition) starts on keys of its own, so that its
// history explains every value its reads return.
func (g *Gen) Fresh() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i := range g.slots {
		g.slots[i] = slot{key: g.next}
		g.next++
	}
}

// Txn draws a transaction of user's into buf: n micro-operations (n
// uniform from MinOps to MaxOps), each a read (history.ReadNull, to be
// filled in) with probability ReadShare, else a write of the next unique
// value with fn (history.FnAppend or history.FnWrite). A writing
// transaction has at least one write (one read turned into a write, at
// random, if the draw had none); a read-only one has none. r is the
// user's own stream: the same seed draws the same transactions.
func (g *Gen) Txn(user int, r *rand.Rand, write bool, fn history.Fn, buf []history.Mop) ([]history.Mop, error) {
	if user < 0 || int64(user) >= g.cfg.Stride {
		return buf, fmt.Errorf("%s: user %d is beyond the %d users its values were laid out for", g.cfg.Kind, user, g.cfg.Stride)
	}
	u := &g.users[user]
	n := g.cfg.MinOps + r.IntN(g.cfg.MaxOps-g.cfg.MinOps+1)
	var kinds [MaxOps]bool // true: a write
	writes := 0
	for i := range n {
		kinds[i] = write && r.Float64() >= g.cfg.ReadShare
		if kinds[i] {
			writes++
		}
	}
	if write && writes == 0 {
		kinds[r.IntN(n)] = true
	}
	buf = buf[:0]
	if !write && g.cfg.ReadKeys == ReadOwn && len(u.wrote) > 0 {
		// Read the keys the user last wrote, each once, from a random
		// one on.
		first := r.IntN(len(u.wrote))
		for i := range min(n, len(u.wrote)) {
			buf = append(buf, history.ReadNull(u.wrote[(first+i)%len(u.wrote)]))
		}
		return buf, nil
	}
	if write {
		u.wrote = u.wrote[:0]
	}
	for i := range n {
		s := g.slot(u, r)
		if !kinds[i] {
			buf = append(buf, history.ReadNull(g.key(s, false)))
			continue
		}
		u.n++
		v := u.n*g.cfg.Stride + int64(user)
		k := g.key(s, true)
		if g.cfg.ReadBeforeWrite && !readOrWrote(buf, k) {
			buf = append(buf, history.ReadNull(k))
		}
		buf = append(buf, history.Mop{Fn: fn, Key: k, Value: v})
		if !slices.Contains(u.wrote, k) {
			u.wrote = append(u.wrote, k)
		}
	}
	return buf, nil
}

// readOrWrote reports whether the transaction so far touched key k.
func readOrWrote(ms []history.Mop, k int64) bool {
	for _, m := range ms {
		if m.Key == k {
			return true
		}
	}
	return false
}

// slot chooses an active key's position.
func (g *Gen) slot(u *userGen, r *rand.Rand) int {
	if g.cfg.Dist != Zipfian || g.cfg.Keys == 1 {
		return r.IntN(g.cfg.Keys)
	}
	if u.r != r || u.zipf == nil {
		u.r, u.zipf = r, rand.NewZipf(r, ZipfS, 1, uint64(g.cfg.Keys-1))
	}
	return int(u.zipf.Uint64())
}

// key is the key at position s; a write counts against it, and the one
// that reaches PerKey retires it for a fresh key.
func (g *Gen) key(s int, write bool) int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	sl := &g.slots[s]
	k := sl.key
	if write {
		sl.writes++
		if sl.writes >= g.cfg.PerKey {
			*sl = slot{key: g.next}
			g.next++
		}
	}
	return k
}
