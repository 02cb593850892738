package checking

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"replab/internal/engine"
	"replab/internal/history"
	"replab/internal/workload"
)

func config() Config {
	return Config{Kind: "test", Keys: 3, MinOps: 1, MaxOps: 4, ReadShare: 0.5, Dist: Uniform, PerKey: 5, SyncWait: -1,
		ReadsAt: AtSource, Stride: 4, Dialect: engine.Postgres}
}

// draw has each of users draw n transactions (every third read-only),
// in turn, from streams seeded with seed.
func draw(g *Gen, users, n int, seed uint64) [][]history.Mop {
	rs := make([]*rand.Rand, users)
	for u := range rs {
		rs[u] = rand.New(rand.NewPCG(seed, uint64(u)))
	}
	var out [][]history.Mop
	for i := range n {
		for u := range users {
			t, err := g.Txn(u, rs[u], i%3 != 2, history.FnAppend, nil)
			if err != nil {
				panic(err)
			}
			out = append(out, t)
		}
	}
	return out
}

func text(ts [][]history.Mop) []string {
	var s []string
	for _, t := range ts {
		s = append(s, history.MopsText(t))
	}
	return s
}

// TestValuesAreUniqueAndDeterministic: the same seed draws the same
// transactions; every value is n*stride + user, n counting the user's
// values from 1, so no two are equal; another seed draws others.
func TestValuesAreUniqueAndDeterministic(t *testing.T) {
	a, b := text(draw(NewGen(config()), 4, 300, 7)), text(draw(NewGen(config()), 4, 300, 7))
	if !slices.Equal(a, b) {
		t.Fatal("the same seed drew different transactions")
	}
	if c := text(draw(NewGen(config()), 4, 300, 8)); slices.Equal(a, c) {
		t.Error("another seed drew the same transactions")
	}
	seen := map[int64]bool{}
	next := make([]int64, 4)
	g := NewGen(config())
	for i, tx := range draw(g, 4, 300, 7) {
		u := i % 4
		for _, m := range tx {
			if m.Fn != history.FnAppend {
				continue
			}
			next[u]++
			if want := next[u]*4 + int64(u); m.Value != want {
				t.Fatalf("user %d's value %d is %d, want %d", u, next[u], m.Value, want)
			}
			if seen[m.Value] {
				t.Fatalf("value %d twice", m.Value)
			}
			seen[m.Value] = true
		}
	}
	if _, err := g.Txn(4, rand.New(rand.NewPCG(1, 1)), true, history.FnAppend, nil); err == nil {
		t.Error("user 4 of a stride of 4 was given values")
	}
}

// TestTransactionsHaveTheirShape: n micro-operations within ops_per_txn;
// a writing transaction writes at least once, a read-only one never; a
// read is null until it is filled in.
func TestTransactionsHaveTheirShape(t *testing.T) {
	cfg := config()
	cfg.MinOps, cfg.MaxOps, cfg.ReadShare = 2, 3, 0.9
	g := NewGen(cfg)
	r := rand.New(rand.NewPCG(1, 2))
	lengths := map[int]int{}
	for i := range 2000 {
		write := i%2 == 0
		tx, err := g.Txn(0, r, write, history.FnWrite, nil)
		if err != nil {
			t.Fatal(err)
		}
		lengths[len(tx)]++
		writes := 0
		for _, m := range tx {
			switch {
			case m.Fn == history.FnWrite:
				writes++
			case m.Fn != history.FnRead || m.Got != history.GotNull:
				t.Fatalf("%s: a read already filled in, or another function", history.MopsText(tx))
			}
		}
		if write && writes == 0 || !write && writes > 0 {
			t.Fatalf("%s: %d writes in a transaction that writes: %v", history.MopsText(tx), writes, write)
		}
	}
	if len(lengths) != 2 || lengths[2] < 900 || lengths[3] < 900 {
		t.Errorf("lengths %v, want 2 and 3 about equally", lengths)
	}
}

// TestKeysRotateAfterPerKeyWrites: no key takes more than PerKey writes,
// at most Keys keys are in use at a time (a read finds one that is
// active), and Fresh moves every position to a key never used.
func TestKeysRotateAfterPerKeyWrites(t *testing.T) {
	cfg := config()
	g := NewGen(cfg)
	writes := map[int64]int{}
	retired := map[int64]bool{}
	r := rand.New(rand.NewPCG(3, 3))
	var maxKey int64
	for range 1000 {
		tx, _ := g.Txn(1, r, true, history.FnAppend, nil)
		for _, m := range tx {
			if retired[m.Key] {
				t.Fatalf("key %d used after its %d writes", m.Key, cfg.PerKey)
			}
			maxKey = max(maxKey, m.Key)
			if m.Fn == history.FnAppend {
				if writes[m.Key]++; writes[m.Key] == cfg.PerKey {
					retired[m.Key] = true
				}
			}
		}
	}
	if len(retired) < 100 {
		t.Errorf("%d keys retired after ~1500 writes of at most %d each", len(retired), cfg.PerKey)
	}
	if n := len(writes) - len(retired); n > cfg.Keys {
		t.Errorf("%d keys written and still active, want at most %d", n, cfg.Keys)
	}
	g.Fresh()
	tx, _ := g.Txn(1, r, true, history.FnAppend, nil)
	for _, m := range tx {
		if m.Key <= maxKey {
			t.Errorf("after Fresh, key %d of before (up to %d)", m.Key, maxKey)
		}
	}
}

// TestZipfianFavoursTheFirstKeys: with key_dist = "zipfian" the first
// active key is chosen far more often than the last; uniform, about as
// often.
func TestZipfianFavoursTheFirstKeys(t *testing.T) {
	for _, dist := range []string{Uniform, Zipfian} {
		cfg := config()
		cfg.Keys, cfg.Dist, cfg.PerKey, cfg.ReadShare = 10, dist, MaxPerKey, 1
		g := NewGen(cfg)
		r := rand.New(rand.NewPCG(5, 5))
		count := map[int64]int{}
		for range 5000 {
			tx, _ := g.Txn(0, r, false, history.FnAppend, nil)
			for _, m := range tx {
				count[m.Key]++
			}
		}
		first, last := float64(count[1]), float64(count[10])
		switch {
		case dist == Zipfian && first < 5*last:
			t.Errorf("zipfian: key 1 read %v times, key 10 %v: want far more of key 1", first, last)
		case dist == Uniform && math.Abs(first-last) > 0.25*first:
			t.Errorf("uniform: key 1 read %v times, key 10 %v", first, last)
		}
	}
}

// TestTypesShareTheTransactions: the read-only type's weight is the share
// of transactions that would only read, placed where reads_at says.
func TestTypesShareTheTransactions(t *testing.T) {
	cfg := config()
	if p, want := cfg.ReadOnlyShare(), (0.5+0.25+0.125+0.0625)/4; math.Abs(p-want) > 1e-12 {
		t.Errorf("read-only share %v, want %v", p, want)
	}
	mk := func(name string, write bool, at string) workload.TxType { return workload.TxType{Name: name} }
	for _, tc := range []struct {
		readsAt string
		share   float64
		want    string
	}{
		{AtSource, 0.5, "txn 7656 write at  read 2344 read-only at  "},
		{AtReplica, 0.5, "txn 7656 write at  read 2344 read-only at replica "},
		{AtAny, 0.5, "txn 7656 write at  read 1172 read-only at  read-replica 1172 read-only at replica "},
		{AtSource, 0, "txn 10000 write at  "},
	} {
		cfg.ReadsAt, cfg.ReadShare = tc.readsAt, tc.share
		got := ""
		for _, ty := range cfg.Types(mk) {
			kind := "write"
			if ty.ReadOnly {
				kind = "read-only"
			}
			got += fmt.Sprintf("%s %d %s at %s ", ty.Name, ty.Weight, kind, ty.At)
		}
		if got != tc.want {
			t.Errorf("reads_at %s, read_share %v: %q, want %q", tc.readsAt, tc.share, got, tc.want)
		}
	}
}

// TestSessionSetsTheLevel: the isolation level and wsrep_sync_wait are
// session statements, in each dialect's words; none by default.
func TestSessionSetsTheLevel(t *testing.T) {
	cfg := config()
	if s := cfg.Session(); len(s) != 0 {
		t.Errorf("default: %q", s)
	}
	cfg.Isolation = Serializable
	if s := cfg.Session(); !slices.Equal(s, []string{"SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL SERIALIZABLE"}) {
		t.Errorf("postgres: %q", s)
	}
	cfg.Dialect, cfg.Isolation, cfg.SyncWait = engine.MySQL, ReadUncommitted, 3
	if s := cfg.Session(); !slices.Equal(s, []string{"SET SESSION TRANSACTION ISOLATION LEVEL READ UNCOMMITTED", "SET SESSION wsrep_sync_wait = 3"}) {
		t.Errorf("mysql: %q", s)
	}
}

func TestReadsAfterWrites(t *testing.T) {
	t.Run("read_keys own reads the keys of the user's last write", func(t *testing.T) {
		c := config()
		c.Keys, c.ReadKeys = 50, ReadOwn
		g := NewGen(c)
		r := rand.New(rand.NewPCG(1, 1))
		for range 100 {
			w, err := g.Txn(0, r, true, history.FnAppend, nil)
			if err != nil {
				t.Fatal(err)
			}
			var wrote []int64
			for _, m := range w {
				if m.IsWrite() && !slices.Contains(wrote, m.Key) {
					wrote = append(wrote, m.Key)
				}
			}
			rd, _ := g.Txn(0, r, false, history.FnAppend, nil)
			if len(rd) == 0 || len(rd) > len(wrote) {
				t.Fatalf("after writing %v: read %v", wrote, rd)
			}
			for _, m := range rd {
				if m.IsWrite() || !slices.Contains(wrote, m.Key) {
					t.Fatalf("after writing keys %v, a read-only transaction %s", wrote, history.MopsText(rd))
				}
			}
		}
		// Before any write: random keys.
		if rd, _ := NewGen(c).Txn(1, r, false, history.FnAppend, nil); len(rd) == 0 {
			t.Error("no read before the first write")
		}
	})
	t.Run("the read types carry the delay and, at a replica, the wait", func(t *testing.T) {
		c := config()
		c.ReadsAt, c.ReadDelay, c.ReadWait = AtAny, 50e6, WaitOwnWrites
		for _, ty := range c.Types(func(name string, write bool, at string) workload.TxType { return workload.TxType{Name: name} }) {
			wantWait := ty.ReadOnly && ty.At == workload.AtReplica
			if wantDelay := ty.ReadOnly; (ty.ReadDelay != 0) != wantDelay || ty.WaitOwnWrites != wantWait {
				t.Errorf("%s at %q: delay %s, wait %v", ty.Name, ty.At, ty.ReadDelay, ty.WaitOwnWrites)
			}
		}
	})
}
