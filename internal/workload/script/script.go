// Package script is the "script" workload: the user's own SQL, as
// pgbench scripts (SQL statements, \set with pgbench's expressions,
// \sleep, \gset, \if), with a schema file and an optional load file.
package script

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"replab/internal/engine"
	"replab/internal/workload"
)

// Factory registers the workload as kind "script".
var Factory = workload.Factory{Kind: "script", New: New}

// MaxScale bounds the scale option (pgbench's -s).
const MaxScale = 1_000_000

// Workload runs transaction scripts chosen by weight.
type Workload struct {
	dialect engine.Dialect
	scale   int64
	seed    int64
	readsAt string
	schema  engine.Schema
	load    []loadStep
	rows    int64
	txs     []txFile

	// users holds each user's variables: they outlive a transaction, as
	// a pgbench client's do. A user runs one transaction at a time.
	mu    sync.Mutex
	users map[int]*env
}

// txFile is one transaction file with its weight.
type txFile struct {
	name   string
	weight int
	sc     *Script
}

// New reads the options: schema, load, transactions, scale, reads_at.
func New(o *workload.Options) (workload.Workload, error) {
	w := &Workload{
		dialect: o.Dialect,
		scale:   o.Int("scale", 1, 1, MaxScale),
		seed:    o.Seed,
		readsAt: o.String("reads_at", "source", "source", "replica"),
		users:   map[int]*env{},
	}
	if o.Dialect != engine.Postgres && o.Dialect != engine.MySQL {
		return nil, workload.ErrNoDialect("script", o.Dialect)
	}
	dir := "."
	if o.Spec != nil && o.Spec.File != "" {
		dir = filepath.Dir(o.Spec.File)
	}
	read := func(key, path string) (string, string, bool) {
		full := path
		if !filepath.IsAbs(path) {
			full = filepath.Join(dir, path)
		}
		b, err := os.ReadFile(full)
		if err != nil {
			o.Errorf(key, "%v", err)
			return "", "", false
		}
		return full, string(b), true
	}
	if !o.Has("schema") {
		o.Errorf("schema", "a script workload needs schema = \"FILE.sql\" (its CREATE TABLE statements)")
	} else if path := o.String("schema", ""); path != "" {
		if full, text, ok := read("schema", path); ok {
			s, err := parseSchema(full, text, o.Dialect)
			if err != nil {
				o.Errorf("schema", "%v", err)
			}
			w.schema = s
		}
	}
	if path := o.String("load", ""); path != "" {
		if full, text, ok := read("load", path); ok {
			steps, err := parseLoad(full, text, o.Dialect)
			if err != nil {
				o.Errorf("load", "%v", err)
			}
			w.load = steps
			for _, st := range steps {
				w.rows += max(1, int64(len(st.rows)))
			}
		}
	}
	list := o.Strings("transactions")
	if len(list) == 0 && o.Has("transactions") {
		o.Errorf("transactions", "no transaction file")
	} else if !o.Has("transactions") {
		o.Errorf("transactions", `a script workload needs transactions = ["FILE.sql@WEIGHT", …]`)
	}
	var scripts []*Script
	names := map[string]bool{}
	for _, item := range list {
		path, weight, mark, err := splitWeight(item)
		if err != nil {
			o.Errorf("transactions", "%q: %v", item, err)
			continue
		}
		full, text, ok := read("transactions", path)
		if !ok {
			continue
		}
		sc, err := Parse(full, text, o.Dialect)
		if err != nil {
			o.Errorf("transactions", "%v", err)
			continue
		}
		switch mark {
		case "ro":
			sc.ReadOnly = true
		case "rw":
			sc.ReadOnly = false
		}
		name := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
		for base, k := name, 2; names[name]; k++ {
			name = base + "-" + strconv.Itoa(k)
		}
		names[name] = true
		scripts = append(scripts, sc)
		w.txs = append(w.txs, txFile{name: name, weight: weight, sc: sc})
	}
	if err := CheckVariables(scripts); err != nil {
		o.Errorf("transactions", "%v", err)
	}
	total := 0
	for _, t := range w.txs {
		total += t.weight
	}
	if len(w.txs) > 0 && total == 0 {
		o.Errorf("transactions", "every weight is 0: nothing would run")
	}
	return w, nil
}

// splitWeight splits pgbench's FILE@WEIGHT, with replab's @ro or @rw
// marks (in any order after the file): weight 1 when none is given.
func splitWeight(item string) (path string, weight int, mark string, err error) {
	weight = 1
	path = item
	seen := false
	for {
		i := strings.LastIndexByte(path, '@')
		if i < 0 {
			break
		}
		tail := path[i+1:]
		switch tail {
		case "ro", "rw":
			if mark != "" {
				return "", 0, "", fmt.Errorf("both @%s and @%s", mark, tail)
			}
			mark = tail
		default:
			n, err := strconv.Atoi(tail)
			if err != nil {
				return "", 0, "", fmt.Errorf("after @ want a weight (a whole number) or ro/rw, not %q", tail)
			}
			if n < 0 || n > 1_000_000 {
				return "", 0, "", fmt.Errorf("weight %d: want 0 to 1000000", n)
			}
			if seen {
				return "", 0, "", fmt.Errorf("two weights")
			}
			seen, weight = true, n
		}
		path = path[:i]
	}
	if path == "" {
		return "", 0, "", fmt.Errorf("no file")
	}
	return path, weight, mark, nil
}

// Name implements workload.Workload.
func (w *Workload) Name() string { return "script" }

// Schema implements workload.Workload: the schema file's tables.
func (w *Workload) Schema() engine.Schema { return w.schema }

// TotalRows implements workload.Workload: the rows of the load file's
// COPY blocks, and one for each of its other statements.
func (w *Workload) TotalRows() int64 { return w.rows }

// Transactions implements workload.Workload: one type per file, named
// after it; read-only files run where reads_at says.
func (w *Workload) Transactions() []workload.TxType {
	var types []workload.TxType
	for _, t := range w.txs {
		if t.weight == 0 {
			continue
		}
		sc := t.sc
		tt := workload.TxType{Name: t.name, Weight: t.weight, ReadOnly: sc.ReadOnly, Statements: sc.Statements,
			Run: func(ctx context.Context, tx *workload.Tx, r *rand.Rand) (int64, error) {
				return sc.run(ctx, w.env(tx.User, r), txExec{tx: tx})
			}}
		if sc.ReadOnly && w.readsAt == "replica" {
			tt.At = workload.AtReplica
		}
		// A read-only file without BEGIN: each statement on its own, as
		// pgbench runs it (no BEGIN and COMMIT around a lone SELECT).
		tt.Autocommit = sc.ReadOnly && !sc.Begins
		if sc.Batchable {
			tt.Batch = func(user int, r *rand.Rand, s *workload.Scratch) []workload.Call {
				x := workload.StateOf[batchExec](s, nil)
				x.reset()
				if _, err := sc.run(context.Background(), w.env(user, r), x); err != nil {
					return []workload.Call{{Err: err}}
				}
				return x.calls
			}
		}
		types = append(types, tt)
	}
	return types
}

// env is user's variables with r as the random source.
func (w *Workload) env(user int, r *rand.Rand) *env {
	w.mu.Lock()
	defer w.mu.Unlock()
	e := w.users[user]
	if e == nil {
		e = &env{vars: map[string]*variable{
			"scale":     {v: intValue(w.scale), ok: true},
			"client_id": {v: intValue(int64(user)), ok: true},
			// pgbench draws these at random; replab derives them from the run's seed.
			"random_seed":  {v: intValue(w.seed), ok: true},
			"default_seed": {v: intValue(int64(hashMurmur2(w.seed, 0x5eed))), ok: true},
		}}
		w.users[user] = e
	}
	e.r = r
	return e
}
