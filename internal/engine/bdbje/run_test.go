package bdbje_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"replab/internal/engine"
	"replab/internal/engine/bdbje"
	"replab/internal/labtest"
	"replab/internal/runner"
	"replab/internal/spec"
	"replab/internal/testkit"
	"replab/internal/workload"
	"replab/internal/workload/kvinsert"
)

var runSpec = testkit.ReadFile("testdata/run.toml")

// killMaster kills the master 4 s into the measure phase and leaves it
// down.
const killMaster = `
[[fault]]
at = "4s"
node = "n1"
do = "kill"
`

// syncLog is the run's log, watched for a line.
type syncLog struct {
	mu   sync.Mutex
	b    bytes.Buffer
	want string
	seen chan struct{}
	once sync.Once
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Write(p)
	if l.want != "" && strings.Contains(l.b.String(), l.want) {
		l.once.Do(func() { close(l.seen) })
	}
	return len(p), nil
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func run(t *testing.T, ctx context.Context, name, duration, faults string, log *syncLog) (map[string]any, string, error) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "spec.toml")
	if err := os.WriteFile(path, []byte(fmt.Sprintf(runSpec, name, duration, faults)), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := spec.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "results")
	_, _, runErr := runner.Run(ctx, s, runner.Options{
		Out: out, StateRoot: t.TempDir(), DataRoot: t.TempDir(), Log: log, Version: "test",
		Engines: engine.NewRegistry(bdbje.Engine{}), Workloads: workload.NewRegistry(kvinsert.Factory),
	})
	t.Logf("run log:\n%s", log.String())
	b, err := os.ReadFile(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatalf("summary.json missing (run error %v): %v", runErr, err)
	}
	var sum map[string]any
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	return sum, out, runErr
}

func get(t *testing.T, m map[string]any, keys ...string) any {
	t.Helper()
	var v any = m
	for _, k := range keys {
		mm, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("%v: not an object at %q", keys, k)
		}
		if v, ok = mm[k]; !ok {
			t.Fatalf("summary.json has no %v", keys)
		}
	}
	return v
}

// leftovers lists what a lab named name left: JVMs and network namespaces.
func leftovers(name string) string {
	var out []string
	if b, _ := exec.Command("pgrep", "-af", "ReplabNode.*"+name).CombinedOutput(); len(bytes.TrimSpace(b)) > 0 {
		out = append(out, "JVMs: "+string(b))
	}
	if b, _ := exec.Command("ip", "netns", "list").CombinedOutput(); bytes.Contains(b, []byte(name)) {
		out = append(out, "namespaces: "+string(b))
	}
	return strings.Join(out, "; ")
}

// TestRunKVInsert: replab run drives kv-insert through the node protocol
// and measures it as any engine: inserts, per-replica lag from the stamps
// carried in the inserts (a secondary's too), thread roles, JVM gauges,
// converged copies; the master's kill -9 in the measure phase elects
// another node, the clients follow it, and the fault's measures say how
// long nothing committed; every acknowledged insert is at every node
// afterwards. Then a run interrupted in its measure phase
// (Ctrl-C) ends marked incomplete and leaves no JVM and no namespace.
func TestRunKVInsert(t *testing.T) {
	t.Parallel()
	testkit.Need(t, testkit.Lab, testkit.Java)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	name := labtest.UniqueName("jerun")
	log := &syncLog{}
	// 10 s after the kill at 4 s: an election and the clients' return took
	// over 6 s on a loaded machine (four JVMs beside other tests).
	sum, out, err := run(t, ctx, name, "14s", killMaster, log)
	if err != nil {
		t.Fatal(err)
	}
	if sum["complete"] != true {
		t.Fatalf("complete = %v", sum["complete"])
	}
	if n, _ := get(t, sum, "transactions").(float64); n < 50 {
		t.Errorf("%v inserts in 14 s", n)
	}
	// The inserts in flight at the master when it died fail (their
	// connections break), and while the remaining replica syncs up with
	// the new master a commit may miss its acknowledgement: a few errors,
	// no more.
	n, _ := get(t, sum, "transactions").(float64)
	if e, _ := get(t, sum, "errors").(float64); e > max(6, n/50) {
		t.Errorf("%v errors in %v inserts", e, n)
	}
	faults, _ := get(t, sum, "faults").([]any)
	if len(faults) != 1 {
		t.Fatalf("faults: %v", get(t, sum, "faults"))
	}
	f := faults[0].(map[string]any)
	if u, _ := f["unavailable_s"].(float64); u <= 0 || u > 30 {
		t.Errorf("unavailable_s %v after the master's kill, want the election's time", u)
	}
	// The clients followed the new master: inserts commit after the kill
	// (the node stays down: the fault's "during" runs to the end).
	if tps, _ := f["during"].(map[string]any)["tps"].(float64); tps <= 0 {
		t.Errorf("no insert committed after the master's kill: %v", f)
	}
	if !strings.Contains(log.String(), "elected master") {
		t.Error("the log does not say when a new master was elected")
	}
	for _, r := range []string{"n2", "n3", "n4"} {
		tracked, _ := get(t, sum, "replicas", r, "tracked").(float64)
		p50, _ := get(t, sum, "replicas", r, "lag_ms", "p50").(float64)
		if tracked == 0 || p50 <= 0 {
			t.Errorf("replica %s: %v tracked, p50 %v ms", r, tracked, p50)
		}
	}
	// n3 is 10 ms away from the master, n4 2 ms: before the kill no stamp
	// can reach them sooner. (After it, which of n2 and n3 is elected
	// decides who feeds whom, and a master's own lag is nil: comparing the
	// two replicas' medians over the run compares elections.)
	before, _ := f["lag_before_ms"].(map[string]any)
	for r, oneWay := range map[string]float64{"n3": 10, "n4": 2} {
		if lag, ok := before[r].(float64); !ok || lag < oneWay {
			t.Errorf("%s: worst lag p99 before the kill %v ms, want at least the link's %.0f ms (lag_before_ms %v)", r, before[r], oneWay, before)
		}
	}
	if _, ok := get(t, sum, "roles", "n1").(map[string]any)["feeder"]; !ok {
		t.Errorf("no feeder role at the master: %v", get(t, sum, "roles", "n1"))
	}
	if hm, _ := get(t, sum, "gauges", "n4", "heap_max_bytes", "max").(float64); hm < 64<<20 || hm > 128<<20 {
		t.Errorf("n4 heap max %v bytes, want about the 128 MiB asked", hm)
	}
	if c, _ := get(t, sum, "convergence", "converged").(bool); !c {
		t.Errorf("convergence: %v", get(t, sum, "convergence"))
	}
	// The fault turned verification on: kv-insert's puts journalled their
	// keys, and with majority acks none acknowledged is missing anywhere.
	acked, _ := get(t, sum, "verification", "acked").(float64)
	lost, _ := get(t, sum, "verification", "lost").(float64)
	verified, _ := get(t, sum, "verification", "nodes").(map[string]any)
	if acked < 50 || lost != 0 || len(verified) != 4 {
		t.Errorf("verification: %v", get(t, sum, "verification"))
	}
	for _, f := range []string{"gauges.csv", "replication.csv", "roles.csv", "lag.csv"} {
		if fi, err := os.Stat(filepath.Join(out, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s missing or empty", f)
		}
	}
	if l := leftovers(name); l != "" {
		t.Errorf("left behind: %s", l)
	}

	// Ctrl-C in the measure phase.
	name = labtest.UniqueName("jeint")
	log = &syncLog{want: "running ", seen: make(chan struct{})}
	ictx, icancel := context.WithCancel(ctx)
	defer icancel()
	go func() {
		select {
		case <-log.seen:
			time.Sleep(2 * time.Second)
			icancel()
		case <-ictx.Done():
		}
	}()
	sum, _, err = run(t, ictx, name, "10m", "", log)
	if err == nil {
		t.Error("an interrupted run returned no error")
	}
	if sum["complete"] != false {
		t.Errorf("complete = %v, want false", sum["complete"])
	}
	if l := leftovers(name); l != "" {
		t.Errorf("left behind after Ctrl-C: %s", l)
	}
}
