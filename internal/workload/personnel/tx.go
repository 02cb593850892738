package personnel

import (
	"context"
	"fmt"
	"math/rand/v2"

	"replab/internal/engine"
	"replab/internal/workload"
)

// placeholders are each dialect's parameter markers for $1, $2.
var placeholders = map[engine.Dialect][2]string{
	engine.Postgres: {"$1", "$2"},
	engine.MySQL:    {"?", "?"},
}

// UpdateSQL is the study's transaction: a new description for one person.
func UpdateSQL(dialect engine.Dialect) string {
	p := placeholders[dialect]
	return "UPDATE per SET per_dscrptn_text = " + p[0] + " WHERE per_id = " + p[1]
}

// LookupSQL reads one person, as a user at a snapshot site would.
func LookupSQL(dialect engine.Dialect) string {
	return "SELECT per_last_nm, per_frst_nm, per_birth_clndr_dt, per_dscrptn_text FROM per WHERE per_id = " + placeholders[dialect][0]
}

// Transactions implements workload.Workload: "update" (the study's, weight
// 100 - read_pct, at the source) and "lookup" (weight read_pct, read-only,
// where reads_at says); a type whose weight is 0 is left out.
func (w *Workload) Transactions() []workload.TxType {
	w.written.reset() // a measurement's history starts here
	var types []workload.TxType
	if w.readPct < 100 {
		types = append(types, workload.TxType{Name: "update", Weight: 100 - w.readPct,
			Statements: []workload.Statement{{Name: "update", SQL: UpdateSQL(w.dialect)}}, Run: w.update, Batch: w.updateBatch})
	}
	if w.readPct > 0 {
		types = append(types, workload.TxType{Name: "lookup", Weight: w.readPct, ReadOnly: true, At: w.readsAt,
			Statements: []workload.Statement{{Name: "lookup", SQL: LookupSQL(w.dialect)}}, Run: w.lookup})
	}
	return types
}

// person is a uniformly random person.
func (w *Workload) person(r *rand.Rand) int64 { return 1 + r.Int64N(w.persons) }

// update writes text_bytes of fresh text into a random person's
// description; it changes exactly one row.
func (w *Workload) update(ctx context.Context, tx *workload.Tx, r *rand.Rand) (int64, error) {
	id := w.person(r)
	text := Text(r, w.textBytes)
	if tx.Rec.On() {
		tx.Rec.Add(w.writeMop(id, []byte(text)))
	}
	res, err := tx.Exec(ctx, "update", text, id)
	if err != nil {
		return 0, fmt.Errorf("update per %d: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("update per %d: %w", id, err)
	}
	if n != 1 {
		return n, fmt.Errorf("update per %d: %d rows changed, want 1", id, n)
	}
	return n, nil
}

// updateBatch is update as one pipelined call (same draws from r), built
// in the user's scratch when it has one.
func (w *Workload) updateBatch(_ int, r *rand.Rand, s *workload.Scratch) []workload.Call {
	u := workload.StateOf(s, func(u *updateCall) {
		// The arguments point at the text and id: boxing them anew would
		// allocate each time.
		u.calls[0] = workload.Call{Stmt: "update", Args: []any{&u.text, &u.id}, Rows: 1}
	})
	u.id = w.person(r)
	u.text = AppendText(u.text[:0], r, w.textBytes)
	if s != nil && s.Rec.On() {
		s.Rec.Add(w.writeMop(u.id, u.text))
	}
	return u.calls[:]
}

// updateCall is one user's update call, reused (workload.Scratch).
type updateCall struct {
	text  []byte
	id    int64
	calls [1]workload.Call
}

// lookup reads a random person; it changes nothing.
func (w *Workload) lookup(ctx context.Context, tx *workload.Tx, r *rand.Rand) (int64, error) {
	id := w.person(r)
	var last, first, text string
	var birth any
	if err := tx.QueryRow(ctx, "lookup", id).Scan(&last, &first, &birth, &text); err != nil {
		return 0, fmt.Errorf("look up per %d: %w", id, err)
	}
	if tx.Rec.On() {
		tx.Rec.Add(w.readMop(id, text))
	}
	return 0, nil
}
