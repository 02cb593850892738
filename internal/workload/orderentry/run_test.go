package orderentry

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"replab/internal/engine"
	"replab/internal/engine/postgres"
	"replab/internal/engine/postgres/pgtest"
	"replab/internal/labtest"
	"replab/internal/runner"
	"replab/internal/spec"
	"replab/internal/workload"
)

// TestPostgresRun runs order entry as `replab run` does — a primary and an
// asynchronous standby serving the browsing types, four users across a
// link, the lag probe, every commit journalled — and wants every type committed without an error,
// the copies converged and no acknowledged commit missing anywhere.
func TestPostgresRun(t *testing.T) {
	t.Parallel()
	pgtest.Require(t)
	dir := t.TempDir()
	text := strings.Replace(postgresSpec, `name = "NAME"`, `name = "`+labtest.UniqueName("oerun")+`"`, 1)
	text = strings.Replace(text, "[node.p1.settings]\nshared_preload_libraries = \"pg_stat_statements\"\n", "", 1)
	text = strings.Replace(text, `kind = "order-entry"`, "kind = \"order-entry\"\ncustomers = 500\nreads_at = \"replica\"", 1)
	text = strings.Replace(text, "[run]\n", "[run]\nclient = \"client\"\nwarmup = \"1s\"\nduration = \"3s\"\ncooldown = \"0s\"\nverify = true\n", 1)
	path := filepath.Join(dir, "spec.toml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := spec.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var log strings.Builder
	sum, _, err := runner.Run(ctx, s, runner.Options{Out: filepath.Join(dir, "results"), StateRoot: t.TempDir(), DataRoot: t.TempDir(), Log: &log, Version: "test",
		Engines: engine.NewRegistry(postgres.Engine{}), Workloads: workload.NewRegistry(Factory)})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if sum.Errors != 0 {
		t.Errorf("%d errors\n%s", sum.Errors, log.String())
	}
	for _, name := range typeNames {
		if tr := sum.Types[name]; tr == nil || tr.Count == 0 || len(tr.Errors) > 0 {
			t.Errorf("%s: %+v", name, tr)
		}
	}
	if c := sum.Convergence; c == nil || !c.Converged || c.Nodes != 2 {
		t.Errorf("convergence %+v", c)
	}
	if v := sum.Verification; v == nil || v.Acked == 0 || v.Lost != 0 || v.Error != "" {
		t.Errorf("verification %+v", v)
	}
	t.Logf("%d transactions in %.0f s, %.0f tps", sum.Transactions, sum.MeasureSeconds, float64(sum.Transactions)/sum.MeasureSeconds)
}
