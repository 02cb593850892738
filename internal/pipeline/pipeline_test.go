package pipeline_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"replab/internal/engine"
	"replab/internal/engine/postgres/pgtest"
	"replab/internal/enginekit"
	"replab/internal/lab"
	"replab/internal/pipeline"
)

// stage runs one pipeline stage on a goroutine until stopped; an error
// other than a stop fails the test.
type stage struct {
	name   string
	cancel context.CancelFunc
	done   chan error
}

func start(t *testing.T, name string, run func(ctx context.Context) error) *stage {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &stage{name: name, cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- run(ctx) }()
	t.Cleanup(func() { s.stop(t) })
	return s
}

// stop ends the stage and fails the test if it had failed.
func (s *stage) stop(t *testing.T) {
	t.Helper()
	if s.cancel == nil {
		return
	}
	s.cancel()
	s.cancel = nil
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("%s: %v", s.name, err)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("%s did not stop within 30 s", s.name)
	}
}

// failed reports a stage that ended by itself.
func (s *stage) failed() error {
	select {
	case err := <-s.done:
		s.done <- err
		if err == nil {
			err = errors.New("stopped by itself")
		}
		return fmt.Errorf("%s: %w", s.name, err)
	default:
		return nil
	}
}

// rig is a source in site cern and a sink in site t1, 15 ms apart, with
// the logical scheme's own subscription disabled so that only the
// pipeline carries changes.
type rig struct {
	l        *lab.Lab
	src, dst *sql.DB
	srcNode  engine.Node
	dstNode  engine.Node
	dir      string
}

func newRig(t *testing.T, prefix string) *rig {
	t.Helper()
	l, c := pgtest.Up(t, prefix, `
[lab]
name = "NAME"

[site.cern]
[site.t1]

[[link]]
sites = ["cern", "t1"]
delay = "15ms"
rate = "20mbit"

[engine]
kind = "postgres"

[node.src]
site = "cern"
role = "primary"

[node.dst]
site = "t1"
role = "replica"
from = "src"

[scheme]
replication = "logical"
`)
	r := &rig{l: l, dir: t.TempDir()}
	for _, n := range c.Nodes() {
		switch n.Name {
		case "src":
			r.srcNode = n
		case "dst":
			r.dstNode = n
		}
	}
	var err error
	if r.src, err = c.(engine.SQL).Open(context.Background(), "src", "cern"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.src.Close() })
	if r.dst, err = c.(engine.SQL).Open(context.Background(), "dst", "t1"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.dst.Close() })
	exec(t, r.dst, "ALTER SUBSCRIPTION replab_dst DISABLE")
	schema := []string{
		"CREATE TABLE acct (id int PRIMARY KEY, bal bigint NOT NULL, note text)",
		"CREATE TABLE item (a int, b text, v int, PRIMARY KEY (a, b))",
		"CREATE TABLE done (id int PRIMARY KEY)",
	}
	exec(t, r.src, schema...)
	exec(t, r.dst, schema...)
	exec(t, r.src, "CREATE PUBLICATION pipe FOR TABLE acct, item, done")
	if err := pipeline.CreateSlot(context.Background(), r.srcNode.DSN, "pipe", l.Site("cern").DialContext); err != nil {
		t.Fatal(err)
	}
	return r
}

func exec(t *testing.T, db *sql.DB, stmts ...string) {
	t.Helper()
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// dml runs n source transactions of inserts, updates (some changing the
// key), deletes, NULLs and awkward text, deterministic from seed.
func dml(t *testing.T, db *sql.DB, seed uint64, first, n int) {
	t.Helper()
	if err := dmlErr(db, seed, first, n); err != nil {
		t.Fatal(err)
	}
}

// dmlErr is dml for goroutines other than the test's.
func dmlErr(db *sql.DB, seed uint64, first, n int) error {
	rng := rand.New(rand.NewPCG(seed, 7))
	notes := []string{"plain", "it's quoted", `back\slash`, "ünïcødé ✓", strings.Repeat("compressible text ", 20)}
	for i := first; i < first+n; i++ {
		tx, err := db.Begin()
		if err != nil {
			return err
		}
		for k := 0; k < 5; k++ {
			id := rng.IntN(200)
			var note any = notes[rng.IntN(len(notes))]
			if rng.IntN(10) == 0 {
				note = nil
			}
			var q string
			var args []any
			switch rng.IntN(6) {
			case 0, 1:
				q, args = "INSERT INTO acct VALUES ($1, $2, $3) ON CONFLICT (id) DO UPDATE SET bal = acct.bal + 1, note = excluded.note", []any{id, rng.IntN(1000), note}
			case 2:
				q, args = "UPDATE acct SET bal = bal + $2, note = $3 WHERE id = $1", []any{id, rng.IntN(50) - 25, note}
			case 3:
				q, args = "DELETE FROM acct WHERE id = $1", []any{id}
			case 4:
				q, args = "INSERT INTO item VALUES ($1, $2, $3) ON CONFLICT (a, b) DO UPDATE SET v = item.v + 1", []any{id % 20, fmt.Sprint("k", id%3), i}
			case 5:
				// A key change: the replicat must find the row by its old key.
				q, args = "UPDATE item SET b = b || $2, v = v + 1 WHERE a = $1 AND length(b) < 12", []any{id % 20, fmt.Sprintf("-%d.%d", i, k)}
			}
			if _, err := tx.Exec(q, args...); err != nil {
				tx.Rollback()
				return fmt.Errorf("%s: %w", q, err)
			}
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	return nil
}

// checksums is each table's rows, hashed in key order.
func checksums(t *testing.T, db *sql.DB) string {
	t.Helper()
	var out []string
	for _, q := range []string{
		"SELECT count(*) || ':' || coalesce(md5(string_agg(a::text, ',' ORDER BY id)), '') FROM acct a",
		"SELECT count(*) || ':' || coalesce(md5(string_agg(i::text, ',' ORDER BY a, b)), '') FROM item i",
	} {
		var s string
		if err := db.QueryRow(q).Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

// waitDone waits until row id of table done is at the sink, or a
// stage fails, or a minute passes.
func waitDone(t *testing.T, dst *sql.DB, id int, stages ...*stage) {
	t.Helper()
	waitFor(t, dst, id, func() error {
		for _, s := range stages {
			if err := s.failed(); err != nil {
				return err
			}
		}
		return nil
	})
}

// waitFor waits until row id of table done is at the sink, or check
// fails, or a minute passes.
func waitFor(t *testing.T, dst *sql.DB, id int, check func() error) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var n int
		if err := dst.QueryRow("SELECT count(*) FROM done WHERE id = $1", id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			return
		}
		if err := check(); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("marker %d not applied at the sink within a minute", id)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// listen opens the collector's listener in site t1.
func listen(t *testing.T, l *lab.Lab, site string) net.Listener {
	t.Helper()
	var ln net.Listener
	if err := l.Site(site).Do(func() (err error) {
		ln, err = net.Listen("tcp", net.JoinHostPort(l.Site(site).Address.String(), "0"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return ln
}

// linkBytes is what the emulator delivered from one site to another.
func linkBytes(l *lab.Lab, from, to string) int64 {
	for _, lk := range l.Status().Links {
		for _, d := range lk.Directions {
			if d.From == from && d.To == to {
				return int64(d.Counters.DeliveredBytes)
			}
		}
	}
	return -1
}

// TestPipelineNormal: extract in cern, pump across the link to a collector
// in t1, replicat local to the sink, batched and compressed; every stage
// stopped and restarted mid-stream; the tables agree at the end, the link
// carried what the pump says it sent, and compression shrank it.
func TestPipelineNormal(t *testing.T) {
	t.Parallel()
	r := newRig(t, "pn")
	local, remote := filepath.Join(r.dir, "local.trail"), filepath.Join(r.dir, "remote.trail")
	cern := r.l.Site("cern").DialContext
	var ex pipeline.Counters
	var co pipeline.Counters
	var pu pipeline.PumpCounters
	var rc pipeline.ReplicatCounters
	extract := func() *stage {
		return start(t, "extract", func(ctx context.Context) error {
			return pipeline.Extract(ctx, pipeline.ExtractConfig{DSN: r.srcNode.DSN, Slot: "pipe", Publications: []string{"pipe"}, Trail: local, Dial: cern}, &ex)
		})
	}
	ln := listen(t, r.l, "t1")
	addr := ln.Addr().String()
	collect := func(ln net.Listener) *stage {
		return start(t, "collector", func(ctx context.Context) error {
			return pipeline.Collect(ctx, ln, pipeline.CollectorConfig{Trail: remote}, &co)
		})
	}
	pump := func() *stage {
		return start(t, "pump", func(ctx context.Context) error {
			return pipeline.Pump(ctx, pipeline.PumpConfig{Name: "t1", Trail: local, Addr: addr, Compress: 6, Dial: cern}, &pu)
		})
	}
	replicat := func() *stage {
		return start(t, "replicat", func(ctx context.Context) error {
			return pipeline.Replicat(ctx, pipeline.ReplicatConfig{Trail: remote, DSN: r.dstNode.DSN, Name: "t1", Batch: true, Dial: r.l.Site("t1").DialContext}, &rc)
		})
	}
	linkBefore := linkBytes(r.l, "cern", "t1")
	ext, col, pmp, rep := extract(), collect(ln), pump(), replicat()

	dml(t, r.src, 1, 0, 100)
	exec(t, r.src, "INSERT INTO done VALUES (1)")
	waitDone(t, r.dst, 1, ext, col, pmp, rep)

	// Each stage stopped and started again while changes flow.
	ext.stop(t)
	dml(t, r.src, 2, 100, 50)
	ext = extract()
	pmp.stop(t)
	col.stop(t)
	dml(t, r.src, 3, 150, 50)
	ln = listen(t, r.l, "t1")
	addr = ln.Addr().String()
	col, pmp = collect(ln), pump()
	rep.stop(t)
	dml(t, r.src, 4, 200, 50)
	rep = replicat()
	exec(t, r.src, "INSERT INTO done VALUES (2)")
	waitDone(t, r.dst, 2, ext, col, pmp, rep)

	if a, b := checksums(t, r.src), checksums(t, r.dst); a != b {
		t.Errorf("the tables differ after the pipeline:\nsource %s\ntarget %s", a, b)
	}
	if n := rc.Transactions.Load(); n < 252 {
		t.Errorf("replicat applied %d transactions, want the 252 committed", n)
	}
	// Batched: a target transaction is one round trip however many
	// changes it holds.
	if rt, tx := rc.RoundTrips.Load(), rc.Syncs.Load(); rt != tx {
		t.Errorf("batched replicat: %d round trips for %d target transactions, want one each", rt, tx)
	}
	sent, raw := pu.SentBytes.Load(), pu.RawBytes.Load()
	if sent <= 0 || float64(raw)/float64(sent) < 1.5 {
		t.Errorf("pump: %d trail bytes sent as %d: want compression to at least halve… a third off this text", raw, sent)
	}
	// The link carries the pump's bytes and the TCP/IP headers: within
	// 25 % and 16 KiB of what the pump says it sent.
	onLink := linkBytes(r.l, "cern", "t1") - linkBefore
	if onLink < sent || float64(onLink) > 1.25*float64(sent)+16384 {
		t.Errorf("link cern->t1 delivered %d bytes; the pump sent %d", onLink, sent)
	}
	t.Logf("extract %d records %d tx; pump %d → %d bytes (%.2f×) in %d blocks; collector %d tx; replicat %d records %d tx in %d round trips",
		ex.Records.Load(), ex.Transactions.Load(), raw, sent, float64(raw)/float64(sent), pu.Blocks.Load(), co.Transactions.Load(),
		rc.Records.Load(), rc.Transactions.Load(), rc.RoundTrips.Load())
}

// TestPipelineRemote: no pump; the replicat runs in cern and applies across
// the link statement by statement, then batched: batching cuts the round
// trips to one per transaction.
func TestPipelineRemote(t *testing.T) {
	t.Parallel()
	r := newRig(t, "pr")
	local := filepath.Join(r.dir, "local.trail")
	cern := r.l.Site("cern").DialContext
	var ex pipeline.Counters
	ext := start(t, "extract", func(ctx context.Context) error {
		return pipeline.Extract(ctx, pipeline.ExtractConfig{DSN: r.srcNode.DSN, Slot: "pipe", Publications: []string{"pipe"}, Trail: local, Dial: cern}, &ex)
	})
	var mu sync.Mutex
	results := map[bool]*pipeline.ReplicatCounters{}
	for i, batch := range []bool{false, true} {
		var rc pipeline.ReplicatCounters
		rep := start(t, fmt.Sprintf("replicat (batch %v)", batch), func(ctx context.Context) error {
			return pipeline.Replicat(ctx, pipeline.ReplicatConfig{Trail: local, DSN: r.dstNode.DSN, Name: "remote", Batch: batch, Dial: cern}, &rc)
		})
		dml(t, r.src, uint64(10+i), i*40, 40)
		exec(t, r.src, fmt.Sprintf("INSERT INTO done VALUES (%d)", i+1))
		waitDone(t, r.dst, i+1, ext, rep)
		rep.stop(t)
		mu.Lock()
		results[batch] = &rc
		mu.Unlock()
	}
	if a, b := checksums(t, r.src), checksums(t, r.dst); a != b {
		t.Errorf("the tables differ after the pipeline:\nsource %s\ntarget %s", a, b)
	}
	plain, batched := results[false], results[true]
	// Statement by statement: BEGIN, each statement, the checkpoint and
	// COMMIT.
	if rt, want := plain.RoundTrips.Load(), plain.Statements.Load()+3*plain.Syncs.Load(); rt != want {
		t.Errorf("plain replicat: %d round trips, want %d (statements + 3 per transaction)", rt, want)
	}
	if rt, tx := batched.RoundTrips.Load(), batched.Syncs.Load(); rt != tx {
		t.Errorf("batched replicat: %d round trips for %d transactions, want one each", rt, tx)
	}
	t.Logf("plain: %d statements, %d target transactions", plain.Statements.Load(), plain.Syncs.Load())
	t.Logf("remote replicat: plain %d records in %d round trips; batched %d records in %d round trips",
		plain.Records.Load(), plain.RoundTrips.Load(), batched.Records.Load(), batched.RoundTrips.Load())
}

// TestParallelReplicatsKeepEachKeysOrder: three replicats share one trail
// by key (GoldenGate's "more replicats" with @RANGE), each applying across
// the link with a checkpoint of its own; a stream that updates a few rows
// over and over ends with the same rows at the sink, so each key's
// changes were applied in order, and every replicat took a share.
func TestParallelReplicatsKeepEachKeysOrder(t *testing.T) {
	t.Parallel()
	r := newRig(t, "pp")
	local := filepath.Join(r.dir, "local.trail")
	cern := r.l.Site("cern").DialContext
	var ex pipeline.Counters
	ext := start(t, "extract", func(ctx context.Context) error {
		return pipeline.Extract(ctx, pipeline.ExtractConfig{DSN: r.srcNode.DSN, Slot: "pipe", Publications: []string{"pipe"}, Trail: local, Dial: cern}, &ex)
	})
	const parts = 3
	counters := make([]pipeline.ReplicatCounters, parts)
	stages := []*stage{ext}
	for i := range parts {
		stages = append(stages, start(t, fmt.Sprintf("replicat %d", i+1), func(ctx context.Context) error {
			return pipeline.Replicat(ctx, pipeline.ReplicatConfig{Trail: local, DSN: r.dstNode.DSN, Name: fmt.Sprintf("t1#%d", i+1),
				Batch: true, GroupOps: 50, Parts: parts, Part: i, SplitBy: "key", Dial: cern}, &counters[i])
		}))
	}
	// 30 rows, each updated about 20 times, in transactions touching
	// several of them.
	exec(t, r.src, "INSERT INTO acct SELECT g, 0, 'start' FROM generate_series(0, 29) g")
	rng := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 120; i++ {
		tx, err := r.src.Begin()
		if err != nil {
			t.Fatal(err)
		}
		for k := 0; k < 5; k++ {
			if _, err := tx.Exec("UPDATE acct SET bal = (bal * 3 + $2) % 1000003, note = $3 WHERE id = $1", rng.IntN(30), rng.IntN(1000), fmt.Sprint(i, ".", k)); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	exec(t, r.src, "INSERT INTO done VALUES (1)")
	waitDone(t, r.dst, 1, stages...)
	// The marker is one replicat's; the others may still be applying.
	deadline := time.Now().Add(time.Minute)
	for checksums(t, r.src) != checksums(t, r.dst) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if a, b := checksums(t, r.src), checksums(t, r.dst); a != b {
		t.Errorf("the tables differ after three replicats:\nsource %s\ntarget %s", a, b)
	}
	for i := range counters {
		if n := counters[i].Records.Load(); n < 60 {
			t.Errorf("replicat %d applied %d changes of 630: want a share (about a third)", i+1, n)
		}
		t.Logf("replicat %d: %d changes in %d target transactions", i+1, counters[i].Records.Load(), counters[i].Syncs.Load())
	}
}

func TestMain(m *testing.M) {
	if pipeline.IsStage() {
		os.Exit(pipeline.StageMain()) // this test binary started as a stage
	}
	os.Exit(m.Run())
}

// procStage is a stage running as a process in a site.
type procStage struct {
	site string
	cfg  pipeline.StageConfig
	proc *enginekit.Proc
}

// TestStagesSurviveKill9: the four stages as processes in their sites
// (extract and pump in cern, collector and replicat in t1) while
// transactions flow; each is killed with SIGKILL and started again in
// turn, twice. Every change arrives once: the tables agree at the end.
func TestStagesSurviveKill9(t *testing.T) {
	t.Parallel()
	r := newRig(t, "pk")
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	local, remote := filepath.Join(r.dir, "local.trail"), filepath.Join(r.dir, "remote.trail")
	listen := net.JoinHostPort(r.l.Site("t1").Address.String(), "7819")
	stats := func(kind string) string { return filepath.Join(r.dir, kind+".json") }
	stages := []*procStage{
		{site: "cern", cfg: pipeline.StageConfig{Kind: pipeline.KindExtract, Stats: stats("extract"),
			Extract: &pipeline.ExtractConfig{DSN: r.srcNode.DSN, Slot: "pipe", Publications: []string{"pipe"}, Trail: local}}},
		{site: "cern", cfg: pipeline.StageConfig{Kind: pipeline.KindPump, Stats: stats("pump"),
			Pump: &pipeline.PumpConfig{Name: "t1", Trail: local, Addr: listen, Compress: 1}}},
		{site: "t1", cfg: pipeline.StageConfig{Kind: pipeline.KindCollector, Stats: stats("collector"),
			Collector: &pipeline.CollectorConfig{Trail: remote}, Listen: listen}},
		{site: "t1", cfg: pipeline.StageConfig{Kind: pipeline.KindReplicat, Stats: stats("replicat"),
			Replicat: &pipeline.ReplicatConfig{Trail: remote, DSN: r.dstNode.DSN, Name: "t1", Batch: true}}},
	}
	startProc := func(s *procStage) {
		t.Helper()
		cmd, err := pipeline.Command(bin, s.cfg)
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = &testWriter{t: t, prefix: s.cfg.Kind + ": "}
		if s.proc, err = enginekit.StartProc(r.l.Site(s.site), cmd); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range stages {
		startProc(s)
	}
	t.Cleanup(func() {
		for _, s := range stages {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if err := s.proc.Signal(ctx, syscall.SIGTERM); err != nil {
				t.Errorf("%s did not stop: %v", s.cfg.Kind, err)
				_ = s.proc.Signal(context.Background(), syscall.SIGKILL)
			}
			cancel()
		}
	})
	check := func() error {
		for _, s := range stages {
			select {
			case <-s.proc.Exited():
				st, _ := pipeline.ReadStats(s.cfg.Stats)
				return fmt.Errorf("%s exited (%s): %s", s.cfg.Kind, s.proc.ExitStatus(), st.Error)
			default:
			}
		}
		return nil
	}

	// Transactions flow while each stage is killed and started again.
	stopDML, dmlErrc := make(chan struct{}), make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stopDML:
				dmlErrc <- nil
				return
			default:
			}
			if err := dmlErr(r.src, uint64(100+i), i*10, 10); err != nil {
				dmlErrc <- err
				return
			}
		}
	}()
	for _, s := range append(stages, stages...) { // each twice
		time.Sleep(400 * time.Millisecond)
		if err := check(); err != nil {
			t.Fatal(err)
		}
		if err := s.proc.Signal(context.Background(), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		startProc(s)
	}
	time.Sleep(400 * time.Millisecond)
	close(stopDML)
	if err := <-dmlErrc; err != nil {
		t.Fatal(err)
	}
	exec(t, r.src, "INSERT INTO done VALUES (1)")
	waitFor(t, r.dst, 1, check)
	if a, b := checksums(t, r.src), checksums(t, r.dst); a != b {
		t.Errorf("the tables differ after the kills:\nsource %s\ntarget %s", a, b)
	}
	// The counters are the restarted processes' own, so they only need
	// to show work done.
	time.Sleep(2 * pipeline.StatsEvery)
	for _, s := range stages {
		st, err := pipeline.ReadStats(s.cfg.Stats)
		if err != nil {
			t.Fatal(err)
		}
		if st.PID != s.proc.PID() || st.Transactions == 0 {
			t.Errorf("%s stats: %+v, want the running process's (pid %d) with transactions", s.cfg.Kind, st, s.proc.PID())
		}
		t.Logf("%s: %+v", s.cfg.Kind, st)
	}
}

// testWriter passes a process's stderr to the test log.
type testWriter struct {
	t      *testing.T
	prefix string
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.t.Log(w.prefix + strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
