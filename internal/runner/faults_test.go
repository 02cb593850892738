package runner

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"replab/internal/engine"
	"replab/internal/engine/fake"
	"replab/internal/fault"
	"replab/internal/spec"
	"replab/internal/workload"
	"replab/internal/workload/kvinsert"
)

// TestFaultScheduleOnTheFake: a standby killed 1 s into the measure phase
// and started again 1 s later: faults.csv logs both, summary.json measures
// the run around it, and the run completes (the error cut-off is off).
func TestFaultScheduleOnTheFake(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "spec.toml")
	if err := os.WriteFile(path, []byte(strings.NewReplacer(`warmup = "400ms"`, `warmup = "500ms"`, `duration = "1s"`, `duration = "3s"`,
		`cooldown = "100ms"`, `cooldown = "500ms"`).Replace(fakeSpec("", ""))), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := spec.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	s.Faults = []spec.Fault{{At: time.Second, For: time.Second, Node: "s", Do: spec.FaultKill, Line: 1},
		{At: 2500 * time.Millisecond, Node: "s", Do: spec.FaultPause, Line: 2}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var log bytes.Buffer
	out := filepath.Join(dir, "results")
	sum, _, err := Run(ctx, s, Options{Out: out, StateRoot: t.TempDir(), DataRoot: t.TempDir(), Log: &log, Version: "test", Offline: true,
		Engines: engine.NewRegistry(fake.Engine{}), Workloads: workload.NewRegistry(kvinsert.Factory)})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	f, err := os.Open(filepath.Join(out, "faults.csv"))
	if err != nil {
		t.Fatal(err)
	}
	ev, err := fault.ReadCSV(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ev {
		got = append(got, e.Action+" "+e.What)
	}
	want := []string{"apply node s kill", "heal node s kill", "apply node s pause"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("events %q, want %q\n%s", got, want, log.String())
	}
	if len(ev) == 3 && (ev[0].AtS < 1 || ev[1].AtS < 2 || ev[2].Err == "") {
		t.Errorf("times or errors: %+v (the fake cannot pause)", ev)
	}
	if len(sum.Faults) != 2 {
		t.Fatalf("summary faults: %+v", sum.Faults)
	}
	k := sum.Faults[0]
	if k.HealS == nil || k.Before.TPS <= 0 || k.Before.FromS != -0.5 || k.During.FromS != k.AtS {
		t.Errorf("kill: %+v", k)
	}
	t.Log(log.String())
	if !strings.Contains(log.String(), "fault at 1.0 s: apply node s kill") {
		t.Errorf("the log does not say when the fault happened:\n%s", log.String())
	}
}
