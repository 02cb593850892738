package driver

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"replab/internal/engine"
	"replab/internal/history"
	"replab/internal/workload"
)

// The history the driver records, on the fake engine: every attempt one
// operation, its outcome from what was sent, the user's process number
// renewed after an info operation.

// scriptedRegister is one user's transaction type on the fake: read
// register 1, write attempt a's value a*10 to it, and do what the script
// says for that attempt (fail before the COMMIT is sent, or kill the node
// so that the COMMIT's answer never comes).
type scriptedRegister struct {
	c       engine.Cluster
	attempt int64
	failAt  int64 // the attempt that fails before its COMMIT
	killAt  int64 // the attempt whose COMMIT meets a dead node
	plan    []history.Mop
}

func (s *scriptedRegister) tx() workload.TxType {
	return workload.TxType{Name: "rw", Weight: 1,
		Statements: []workload.Statement{
			{Name: "get", SQL: "SELECT v FROM kv WHERE k = $1"},
			{Name: "put", SQL: "INSERT INTO kv (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v"},
		},
		Run: func(ctx context.Context, tx *workload.Tx, r *rand.Rand) (int64, error) {
			s.attempt++
			a := s.attempt
			s.plan = append(s.plan[:0], history.ReadNull(1), history.Write(1, a*10))
			tx.Rec.Record(s.plan)
			var v int64
			switch err := tx.QueryRow(ctx, "get", int64(1)).Scan(&v); {
			case errors.Is(err, sql.ErrNoRows): // the initial nil
			case err != nil:
				return 0, err
			default:
				s.plan[0] = history.ReadValue(1, v)
			}
			if _, err := tx.Exec(ctx, "put", int64(1), a*10); err != nil {
				return 0, err
			}
			switch a {
			case s.failAt:
				return 0, errors.New("the workload gave up before COMMIT")
			case s.killAt:
				if err := s.c.(engine.NodeControl).Kill(ctx, "p"); err != nil {
					return 0, err
				}
			}
			return 1, nil
		}}
}

// restarter starts the killed node again once the driver has counted the
// transaction that met it dead (driver.Observer).
type restarter struct{ c engine.Cluster }

func (r restarter) Committed(string, int64) {}
func (r restarter) Failed(_, code string) {
	if code == ErrConnection {
		_ = r.c.(engine.NodeControl).Start(context.Background(), "p")
	}
}

func TestHistoryRecordsEveryAttemptWithItsOutcome(t *testing.T) {
	// One user, seven transactions. The fake fails every third COMMIT at
	// the source with a serialization failure (40001), which the driver
	// retries: commits 3 and 6 fail, and their retries are operations of
	// their own. Attempt 5 gives up before its COMMIT; attempt 6's COMMIT
	// meets the node killed, so its outcome is unknown.
	db, c := fakeDB(t, "conflict_every = 3")
	s := &scriptedRegister{c: c, failAt: 5, killAt: 6}
	var buf bytes.Buffer
	w := history.NewWriter(&buf)
	var clk atomic.Int64 // a clock of its own: one tick per reading
	cfg := withEngine(c, Config{Users: 1, Duration: time.Hour, Transactions: 7, Seed: 1, MaxRetries: 1,
		History: w, NodeOf: func(*sql.DB) string { return "p" }, Now: func() int64 { return clk.Add(1) }, Observer: restarter{c}})
	res, err := Run(context.Background(), cfg, []workload.TxType{s.tx()}, Sources(db))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if !res.Complete {
		t.Fatalf("incomplete: %s", res.StopReason)
	}
	ops := readHistory(t, buf.Bytes())
	want := []string{
		"0 p0 p ok rw [r 1 nil] [w 1 10]",
		"1 p0 p ok rw [r 1 10] [w 1 20]",
		"2 p0 p fail rw [r 1 nil] [w 1 30] 40001",
		"3 p0 p ok rw [r 1 20] [w 1 40]",
		"4 p0 p fail rw [r 1 nil] [w 1 50] other",
		"5 p0 p info rw [r 1 nil] [w 1 60] connection",
		"6 p1 p ok rw [r 1 40] [w 1 70]",
		"7 p1 p fail rw [r 1 nil] [w 1 80] 40001",
		"8 p1 p ok rw [r 1 70] [w 1 90]",
	}
	var got []string
	for _, op := range ops {
		line := fmt.Sprintf("%d p%d %s %s %s %s", op.Index, op.Process, op.Node, op.Type, op.TxnType, op.String())
		if op.Error != "" {
			line += " " + op.Error
		}
		got = append(got, line)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("history:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Times come from Config.Now (a few hundred ticks here, never the
	// wall clock), each operation within its own span, one after another.
	for i, op := range ops {
		if op.InvokeNs <= 0 || op.CompleteNs <= op.InvokeNs || op.CompleteNs > 10_000 {
			t.Errorf("op %d: invoked at %d, completed at %d: not the driver's clock", i, op.InvokeNs, op.CompleteNs)
		}
		if i > 0 && op.InvokeNs <= ops[i-1].CompleteNs {
			t.Errorf("op %d invoked at %d, before op %d completed at %d", i, op.InvokeNs, i-1, ops[i-1].CompleteNs)
		}
		// commit_ns: when the COMMIT left, for every attempt that sent
		// one (attempt 5 gave up before its COMMIT: op 4).
		sent := op.Index != 4
		if got := op.CommitNs > op.InvokeNs && op.CommitNs < op.CompleteNs; got != sent {
			t.Errorf("op %d: commit_ns %d within (%d, %d) is %v, want %v", i, op.CommitNs, op.InvokeNs, op.CompleteNs, got, sent)
		}
	}
	h := res.History
	if h == nil || h.Operations != 9 || h.Measure != 9 || h.Info != 1 || h.Processes != 2 || h.Err != "" {
		t.Errorf("counted %+v, want 9 operations, all in the measure phase, 1 info, 2 processes", h)
	}
	// The driver's own counts are of transactions: 7, of which 2 failed
	// (attempt 5 and the unknown 6); 2 retries.
	if res.Transactions != 5 || res.Errors != 2 || res.Retries != 2 {
		t.Errorf("%d committed, %d errors, %d retries; want 5, 2, 2", res.Transactions, res.Errors, res.Retries)
	}
}

func readHistory(t *testing.T, b []byte) []history.Op {
	t.Helper()
	r := history.NewReader(bytes.NewReader(b), "history.jsonl")
	var ops []history.Op
	for {
		op, err := r.Next()
		if err == io.EOF {
			return ops
		}
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, op)
	}
}

// TestWithoutHistoryTheWorkloadGetsNoRecorder: a run without a history
// hands every attempt a nil recorder; with a sampler that declines some
// attempts, those get none either and are not recorded.
func TestWithoutHistoryTheWorkloadGetsNoRecorder(t *testing.T) {
	db, c := fakeDB(t, "")
	var with, without atomic.Int64
	tx := upsertTx()
	run := tx.Run
	tx.Run = func(ctx context.Context, x *workload.Tx, r *rand.Rand) (int64, error) {
		if x.Rec.On() {
			with.Add(1)
			x.Rec.Add(history.Write(1, with.Load()+1000*int64(x.User)))
		} else {
			without.Add(1)
		}
		return run(ctx, x, r)
	}
	cfg := withEngine(c, Config{Users: 2, Duration: time.Hour, Transactions: 40, Seed: 1})
	if _, err := Run(context.Background(), cfg, []workload.TxType{tx}, Sources(db)); err != nil {
		t.Fatal(err)
	}
	if with.Load() != 0 || without.Load() != 40 {
		t.Fatalf("without a history: %d attempts with a recorder, %d without", with.Load(), without.Load())
	}
	var buf bytes.Buffer
	everyOther := &sampler{w: history.NewWriter(&buf)}
	cfg.History = everyOther
	without.Store(0)
	res, err := Run(context.Background(), cfg, []workload.TxType{tx}, Sources(db))
	if err != nil {
		t.Fatal(err)
	}
	if err := everyOther.w.Close(); err != nil {
		t.Fatal(err)
	}
	ops := readHistory(t, buf.Bytes())
	if with.Load() != 20 || without.Load() != 20 || len(ops) != 20 || res.History.Operations != 20 {
		t.Errorf("sampling every other attempt: %d with a recorder, %d without, %d recorded (counted %d)", with.Load(), without.Load(), len(ops), res.History.Operations)
	}
}

// sampler records every other attempt the users start.
type sampler struct {
	w *history.Writer
	n atomic.Int64
}

func (s *sampler) Record(op history.Op) (int, error) { return s.w.Record(op) }
func (s *sampler) RecordAt(int64) bool               { return s.n.Add(1)%2 == 0 }
