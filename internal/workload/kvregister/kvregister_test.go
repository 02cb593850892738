package kvregister

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"replab/internal/check"
	"replab/internal/clock"
	"replab/internal/engine"
	"replab/internal/history"
	"replab/internal/workload"
	"replab/internal/workload/workloadtest"
)

func build(t *testing.T, options string, dialect engine.Dialect) (*Workload, error) {
	t.Helper()
	w, err := workloadtest.Build(t, Factory, 1, options, dialect)
	if err != nil {
		return nil, err
	}
	return w.(*Workload), nil
}

func TestOptions(t *testing.T) {
	w, err := build(t, "", engine.KV)
	if err != nil {
		t.Fatal(err)
	}
	if w.keys != DefaultKeys || w.opsPerTxn != DefaultOpsPerTxn || w.readShare != DefaultReadShare ||
		w.readsAt != ReadsAtSource || w.consistency != engine.KVNone || w.timeout != DefaultConsistencyTimeout {
		t.Errorf("defaults: %+v", w)
	}
	w, err = build(t, "keys = 3\nops_per_txn = 2\nread_share = 0.9\nreads_at = \"replica\"\nconsistency = \"time:100ms\"\nconsistency_timeout = \"2s\"", engine.KV)
	if err != nil {
		t.Fatal(err)
	}
	if w.keys != 3 || w.opsPerTxn != 2 || w.readShare != 0.9 || w.readsAt != ReadsAtReplica ||
		w.consistency != engine.KVTime || w.maxLag != 100*time.Millisecond || w.timeout != 2*time.Second {
		t.Errorf("options: %+v", w)
	}
	types := w.Transactions()
	if len(types) != 2 || types[0].Name != TxWrite || types[0].Weight != 100 || types[1].Name != TxRead || types[1].Weight != 900 || !types[1].ReadOnly || types[0].ReadOnly {
		t.Errorf("types: %+v", types)
	}
	if w, _ := build(t, "read_share = 1", engine.KV); len(w.Transactions()) != 1 || w.Transactions()[0].Name != TxRead {
		t.Errorf("read_share = 1: %+v", w.Transactions())
	}
	if w, _ := build(t, `consistency = "commit"`, engine.KV); w.consistency != engine.KVCommitPoint {
		t.Errorf("commit: %q", w.consistency)
	}
	for _, c := range []struct{ name, options, want string }{
		{"time without a bound", `consistency = "time"`, `workload.consistency: "time" needs its bound`},
		{"time with a bad bound", `consistency = "time:soon"`, `workload.consistency: want time:DURATION`},
		{"unknown consistency", `consistency = "strong"`, `unknown consistency "strong"`},
		{"reads_at", `reads_at = "standby"`, `workload.reads_at: unknown value "standby"`},
		{"read_share", `read_share = 2`, `workload.read_share: want a number from 0 to 1`},
		{"keys", `keys = 0`, `workload.keys: want a whole number from 1 to 100000`},
		{"unknown option", `users = 3`, `unknown option for workload kv-register; options: consistency, consistency_timeout, keys, ops_per_txn, read_share, reads_at`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := build(t, c.options, engine.KV)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want %q", err, c.want)
			}
		})
	}
	if _, err := build(t, "", engine.Postgres); err == nil || !strings.Contains(err.Error(), "kv-register runs on key-value engines") {
		t.Errorf("on PostgreSQL: %v", err)
	}
}

// rig is a kv-register workload connected to an in-memory cluster, its
// history going to a buffer as the driver writes it (driver/history.go):
// the workload's micro-operations and node, the driver's times, outcome
// and process numbers.
type rig struct {
	w     *Workload
	kv    *workloadtest.MemKV
	hist  *history.Writer
	buf   bytes.Buffer
	r     *rand.Rand
	procs []int // each user's process
	next  int   // the next new process
}

func newRig(t *testing.T, options string, users int) *rig {
	t.Helper()
	w, err := build(t, options, engine.KV)
	if err != nil {
		t.Fatal(err)
	}
	g := &rig{w: w, kv: workloadtest.NewMemKV("m", "r1"), r: rand.New(rand.NewPCG(1, 2))}
	g.hist = history.NewWriter(&g.buf)
	for i := range users {
		g.procs = append(g.procs, i)
	}
	g.next = users
	if err := w.Connect(context.Background(), workload.ConnectEnv{Cluster: g.kv, Nodes: g.kv.Nodes(), Users: users}); err != nil {
		t.Fatal(err)
	}
	return g
}

// do runs one transaction of the named type as user.
func (g *rig) do(t *testing.T, user int, typ string) error {
	t.Helper()
	for _, tt := range g.w.Transactions() {
		if tt.Name != typ {
			continue
		}
		var rec workload.Recorder
		invoke := clock.Now()
		_, err := tt.Op(context.Background(), workload.OpCall{User: user, Rec: &rec}, g.r)
		op := history.Op{Process: g.procs[user], Node: rec.Node(), Type: history.OK, F: history.FTxn,
			InvokeNs: invoke, CompleteNs: clock.Now(), TxnType: typ, Value: slices.Clone(rec.Mops())}
		if err != nil {
			op.Type, op.Error = history.Info, engine.Classify(g.kv, err).Code
			if tt.ReadOnly || errors.Is(err, engine.ErrNotCommitted) {
				op.Type = history.Fail
			}
			for i := range op.Value {
				if op.Value[i].Fn == history.FnRead {
					op.Value[i] = history.ReadNull(op.Value[i].Key)
				}
			}
		}
		if op.Type == history.Info {
			g.procs[user], g.next = g.next, g.next+1
		}
		if _, rerr := g.hist.Record(op); rerr != nil {
			t.Fatal(rerr)
		}
		return err
	}
	t.Fatalf("no type %s", typ)
	return nil
}

// ops closes the workload and reads its history back.
func (g *rig) ops(t *testing.T) []history.Op {
	t.Helper()
	if err := g.w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := g.hist.Close(); err != nil {
		t.Fatal(err)
	}
	rd := history.NewReader(&g.buf, "history.jsonl")
	var ops []history.Op
	for {
		op, err := rd.Next()
		if err == io.EOF {
			return ops
		}
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, op)
	}
}

func verdict(t *testing.T, ops []history.Op) *check.Result {
	t.Helper()
	res, err := check.Check(ops, check.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestHistoryAtTheMaster: transactions of several users against one copy,
// recorded, read back and checked: every operation is there with its
// values, written values are unique, and the history is strictly
// serializable.
func TestHistoryAtTheMaster(t *testing.T) {
	g := newRig(t, "keys = 3\nops_per_txn = 3", 4)
	types := g.w.Transactions()
	for i := range 400 {
		if err := g.do(t, i%4, types[workload.Pick(types, g.r)].Name); err != nil {
			t.Fatal(err)
		}
	}
	ops := g.ops(t)
	if len(ops) != 400 {
		t.Fatalf("%d operations recorded, want 400", len(ops))
	}
	reads, writes := 0, 0
	for _, op := range ops {
		if op.Type != history.OK || op.Node != "m" || op.CompleteNs < op.InvokeNs || op.Process != op.Index%4 {
			t.Fatalf("op %v", op)
		}
		if len(op.Value) < 1 || len(op.Value) > 3 {
			t.Fatalf("%d micro-operations: %v", len(op.Value), op)
		}
		switch op.TxnType {
		case TxRead:
			reads++
		case TxWrite:
			writes++
		}
	}
	if reads < 100 || writes < 100 {
		t.Errorf("%d reads, %d writes of 400", reads, writes)
	}
	res := verdict(t, ops)
	if len(res.Anomalies) > 0 || res.StrongestSatisfied != "strict-serializable" || len(res.SessionGuaranteesViolated) > 0 {
		t.Errorf("verdict: strongest %s, anomalies %v, sessions violated %v", res.StrongestSatisfied, res.Anomalies, res.SessionGuaranteesViolated)
	}
}

// TestStaleReplica: a user writes a register and then reads it at a
// replica that has not caught up. With consistency "none" the read sees
// the initial nil, and the checker finds read-your-writes broken; with
// "commit" the replica has the write first (here MemKV syncs), and the
// history is clean.
func TestStaleReplica(t *testing.T) {
	for _, c := range []struct {
		consistency string
		stale       bool
	}{{"none", true}, {"commit", false}} {
		t.Run(c.consistency, func(t *testing.T) {
			g := newRig(t, fmt.Sprintf("keys = 1\nops_per_txn = 1\nreads_at = \"replica\"\nconsistency = %q", c.consistency), 1)
			if err := g.do(t, 0, TxWrite); err != nil {
				t.Fatal(err)
			}
			if err := g.do(t, 0, TxRead); err != nil {
				t.Fatal(err)
			}
			ops := g.ops(t)
			if len(ops) != 2 || ops[1].Node != "r1" {
				t.Fatalf("ops %v", ops)
			}
			read := ops[1].Value[0]
			if gotNil := read.Got == history.GotNull; gotNil != c.stale {
				t.Errorf("the read at the replica: %v", read)
			}
			res := verdict(t, ops)
			if broke := slices.Contains(res.SessionGuaranteesViolated, "read-your-writes"); broke != c.stale {
				t.Errorf("read-your-writes violated: %v, want %v (%v)", broke, c.stale, res.SessionGuaranteesViolated)
			}
		})
	}
}

// TestOutcomes: a put refused before its commit is a fail; one whose
// outcome is unknown is info, and the user goes on as a new process; a
// failed read is a fail with its reads unknown.
func TestOutcomes(t *testing.T) {
	g := newRig(t, "keys = 2\nops_per_txn = 1", 2)
	g.kv.PutHook = func(n int) (bool, error) {
		switch n {
		case 1:
			return false, fmt.Errorf("replica: %w", engine.ErrNotCommitted)
		case 2:
			return true, errors.New("connection reset")
		}
		return true, nil
	}
	for range 3 {
		_ = g.do(t, 1, TxWrite)
	}
	ops := g.ops(t)
	if len(ops) != 3 {
		t.Fatalf("ops %v", ops)
	}
	if ops[0].Type != history.Fail || ops[0].Process != 1 || ops[0].Error == "" {
		t.Errorf("refused put: %+v", ops[0])
	}
	if ops[1].Type != history.Info || ops[1].Process != 1 {
		t.Errorf("unknown put: %+v", ops[1])
	}
	if ops[2].Type != history.OK || ops[2].Process != 2 {
		t.Errorf("the put after an unknown one: %+v, want a new process 2", ops[2])
	}
	// Values are unique across fail, info and ok.
	seen := map[int64]bool{}
	for _, op := range ops {
		v := op.Value[0].Value
		if seen[v] {
			t.Errorf("value %d written twice", v)
		}
		seen[v] = true
	}
}

// TestNewRegistersPerMeasurement: each Connect (one per measurement) uses
// registers no earlier measurement wrote, so every history starts empty.
func TestNewRegistersPerMeasurement(t *testing.T) {
	g := newRig(t, "keys = 2", 1)
	first := g.w.pickKeys(g.r, 2)
	if err := g.w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := g.w.Connect(context.Background(), workload.ConnectEnv{Cluster: g.kv, Nodes: g.kv.Nodes(), Users: 1}); err != nil {
		t.Fatal(err)
	}
	second := g.w.pickKeys(g.r, 2)
	for _, k := range second {
		if slices.Contains(first, k) {
			t.Errorf("register %d used again: %v then %v", k, first, second)
		}
	}
}

func TestReadsAtReplicaNeedsOne(t *testing.T) {
	w, err := build(t, `reads_at = "replica"`, engine.KV)
	if err != nil {
		t.Fatal(err)
	}
	kv := workloadtest.NewMemKV("m")
	err = w.Connect(context.Background(), workload.ConnectEnv{Cluster: kv, Nodes: kv.Nodes(), Users: 1})
	if err == nil || !strings.Contains(err.Error(), "no replica") {
		t.Errorf("got %v", err)
	}
}

// TestStaleValueIsAProcessCycle: a user writes a register twice and then
// reads its first value at a replica that has only that one. The session
// check on registers uses the plain order, which does not order two blind
// writes, so read-your-writes is not flagged; the process order does, and
// the checker reports a -process cycle (docs/workloads.md says so).
func TestStaleValueIsAProcessCycle(t *testing.T) {
	g := newRig(t, "keys = 1\nops_per_txn = 1\nreads_at = \"replica\"", 1)
	if err := g.do(t, 0, TxWrite); err != nil {
		t.Fatal(err)
	}
	g.kv.Sync()
	if err := g.do(t, 0, TxWrite); err != nil {
		t.Fatal(err)
	}
	if err := g.do(t, 0, TxRead); err != nil {
		t.Fatal(err)
	}
	ops := g.ops(t)
	if r := ops[2].Value[0]; r.Got != history.GotValue || r.Value != ops[0].Value[0].Value {
		t.Fatalf("the read at the replica: %v, want the first write's value", r)
	}
	res := verdict(t, ops)
	process := false
	for class := range res.Anomalies {
		process = process || strings.HasSuffix(class, "-process")
	}
	if !process || slices.Contains(res.SessionGuaranteesViolated, "read-your-writes") {
		t.Errorf("anomalies %v, sessions violated %v; want a -process cycle only", res.Anomalies, res.SessionGuaranteesViolated)
	}
}
