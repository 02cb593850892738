// Package kvinsert is the Berkeley DB HA scale test's workload: insert-only
// records of a 10-byte key and a 100-byte value, measuring how insert
// throughput changes with durability and the number of replicas.
package kvinsert

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync/atomic"

	"replab/internal/engine"
	"replab/internal/workload"
)

// Factory registers the workload as kind "kv-insert".
var Factory = workload.Factory{Kind: "kv-insert", New: New}

// Option defaults and bounds.
const (
	DefaultKeyBytes   = 10  // the study's key size
	DefaultValueBytes = 100 // the study's data size
	MinKeyBytes       = 8   // the last 8 bytes make a key unique
	MaxKeyBytes       = 255
	MaxValueBytes     = 60000 // a MySQL row (varbinary key + value) stays under 64 KiB
	MaxPreload        = 100_000_000
)

// Workload is the kv-insert workload with its options resolved.
type Workload struct {
	preload    int64
	keyBytes   int
	valueBytes int
	seed       uint64
	dialect    engine.Dialect

	kv kvClients // on a key-value cluster

	// runSalt and next make inserted keys unique; see key.
	runSalt uint64
	next    atomic.Uint64
}

// New reads the options: preload, key_bytes and value_bytes.
func New(o *workload.Options) (workload.Workload, error) {
	w := &Workload{
		preload:    o.Int("preload", 0, 0, MaxPreload),
		keyBytes:   int(o.Int("key_bytes", DefaultKeyBytes, MinKeyBytes, MaxKeyBytes)),
		valueBytes: int(o.Int("value_bytes", DefaultValueBytes, 1, MaxValueBytes)),
		seed:       uint64(o.Seed),
		dialect:    o.Dialect,
	}
	if _, ok := insertSQL[o.Dialect]; !ok && o.Dialect != engine.KV {
		return nil, workload.ErrNoDialect("kv-insert", o.Dialect)
	}
	var b [8]byte
	crand.Read(b[:])
	w.runSalt = binary.LittleEndian.Uint64(b[:])
	return w, nil
}

// Name implements workload.Workload.
func (w *Workload) Name() string { return "kv-insert" }

// Schema implements workload.Workload: one table, kv(k, v), k the
// primary key.
func (w *Workload) Schema() engine.Schema {
	return engine.Schema{Tables: []engine.Table{{
		Name: "kv",
		Create: map[engine.Dialect]string{
			engine.Postgres: "CREATE TABLE kv (k bytea NOT NULL, v bytea NOT NULL, PRIMARY KEY (k))",
			engine.MySQL:    fmt.Sprintf("CREATE TABLE kv (k varbinary(%d) NOT NULL, v varbinary(%d) NOT NULL, PRIMARY KEY (k))", w.keyBytes, w.valueBytes),
		},
	}}}
}

// DataBytes implements workload.Sizer: the preloaded rows, about 40 bytes
// of overhead each.
func (w *Workload) DataBytes() int64 {
	return w.preload * int64(w.keyBytes+w.valueBytes+40)
}

// TotalRows implements workload.Workload: the preloaded rows.
func (w *Workload) TotalRows() int64 { return w.preload }

var insertSQL = map[engine.Dialect]string{
	engine.Postgres: "INSERT INTO kv (k, v) VALUES ($1, $2)",
	engine.MySQL:    "INSERT INTO kv (k, v) VALUES (?, ?)",
}

// Transactions implements workload.Workload: "insert", one new record
// per transaction — an SQL INSERT, or a put into a key-value store.
func (w *Workload) Transactions() []workload.TxType {
	if w.dialect == engine.KV {
		return []workload.TxType{{Name: "insert", Weight: 100, Op: w.put}}
	}
	return []workload.TxType{{Name: "insert", Weight: 100, Statements: []workload.Statement{{Name: "insert", SQL: insertSQL[w.dialect]}},
		Run: w.insert, Batch: w.insertBatch}}
}

// insertBatch is insert as one pipelined call.
func (w *Workload) insertBatch(_ int, r *rand.Rand, _ *workload.Scratch) []workload.Call {
	k := w.key(r)
	return []workload.Call{{Stmt: "insert", Args: []any{k, fill(r, make([]byte, w.valueBytes))}, Rows: 1}}
}

func (w *Workload) insert(ctx context.Context, tx *workload.Tx, r *rand.Rand) (int64, error) {
	k := w.key(r)
	res, err := tx.Exec(ctx, "insert", k, fill(r, make([]byte, w.valueBytes)))
	if err != nil {
		return 0, fmt.Errorf("insert key %x: %w", k, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("insert key %x: %w", k, err)
	}
	if n != 1 {
		return n, fmt.Errorf("insert key %x: %d rows changed, want 1", k, n)
	}
	return n, nil
}

// key is a new record's key. Its leading key_bytes-8 bytes come from the
// user's stream r; its last 8 bytes are mix(runSalt + n), n counting every
// key this Workload makes. mix is a bijection, so no two keys of one
// Workload (any user, any repetition it drives) share their last 8 bytes;
// runSalt is random per Workload, so keys of separate runs against the
// same table, and preloaded keys, collide with probability about 2^-64
// per pair, whatever seeds the users' streams have.
func (w *Workload) key(r *rand.Rand) []byte {
	k := make([]byte, w.keyBytes)
	fill(r, k[:w.keyBytes-8])
	binary.BigEndian.PutUint64(k[w.keyBytes-8:], mix(w.runSalt+w.next.Add(1)))
	return k
}

// fill fills b with random bytes from r and returns it.
func fill(r *rand.Rand, b []byte) []byte {
	for i := 0; i < len(b); i += 8 {
		var u [8]byte
		binary.LittleEndian.PutUint64(u[:], r.Uint64())
		copy(b[i:], u[:])
	}
	return b
}

// mix is SplitMix64's finalizer, a bijection on 64-bit values.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
