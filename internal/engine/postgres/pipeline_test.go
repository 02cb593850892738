package postgres

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"replab/internal/engine"
	"replab/internal/pipeline"
	"replab/internal/spec"
	"replab/internal/testkit"
)

func TestMain(m *testing.M) {
	if pipeline.IsStage() {
		// The pipeline scheme runs its stages as processes of this binary.
		os.Exit(pipeline.StageMain())
	}
	os.Exit(m.Run())
}

// TestPipelineScheme: replication = "pipeline" in both configurations. Up
// waits for its marker through extract, pump, collector and replicat (or
// the remote replicat); a workload table created afterwards carries rows
// to each replica; the stages are processes with their roles; the state
// names the stages' positions and drains to no backlog.
func TestPipelineScheme(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, scheme string
		roles        []string
	}{
		{"normal", "batch = true\ncompress = 6\n", []string{"extract", "collector", "pump", "replicat"}},
		{"remote", "pump = false\nbatch = true\n", []string{"extract", "replicat"}},
		{"parallel", "batch = true\nreplicats = 3\ncompress = 3\ncodec = \"zstd\"\ntls = true\n", []string{"extract", "collector", "pump", "replicat", "replicat", "replicat"}},
		// Heterogeneous: the replica is a MariaDB server.
		{"mariadb", "batch = true\ntarget = \"mariadb\"\n", []string{"extract", "collector", "pump", "replicat"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "mariadb" {
				testkit.Need(t, testkit.MariaDB)
			}
			_, c, _ := testCluster(t, "pipe"+tc.name[:1], `
[lab]
name = "NAME"

[site.cern]
[site.far]

[[link]]
sites = ["cern", "far"]
delay = "20ms"

[engine]
kind = "postgres"

[node.src]
site = "cern"
role = "primary"

[node.dst]
site = "far"
role = "replica"
from = "src"

[scheme]
replication = "pipeline"
`+tc.scheme)
			ctx := context.Background()
			if err := c.ApplySchema(ctx, engine.Schema{Tables: []engine.Table{{Name: "acct",
				Create: map[engine.Dialect]string{"postgres": "CREATE TABLE acct (id int PRIMARY KEY, bal bigint)",
					"mysql": "CREATE TABLE acct (id INT PRIMARY KEY, bal BIGINT) ENGINE=InnoDB"}}}}); err != nil {
				t.Fatal(err)
			}
			src, dst := open(t, c, "src", "cern"), open(t, c, "dst", "far")
			run(t, src, "INSERT INTO acct SELECT g, g * 10 FROM generate_series(1, 500) g",
				"UPDATE acct SET bal = bal + 1 WHERE id % 7 = 0", "DELETE FROM acct WHERE id > 450")
			if err := c.WaitFlowing(ctx); err != nil {
				t.Fatal(err)
			}
			var n, sum int64
			if err := dst.QueryRow("SELECT count(*), coalesce(sum(bal), 0) FROM acct").Scan(&n, &sum); err != nil {
				t.Fatal(err)
			}
			var wn, wsum int64
			if err := src.QueryRow("SELECT count(*), sum(bal) FROM acct").Scan(&wn, &wsum); err != nil {
				t.Fatal(err)
			}
			if n != wn || sum != wsum {
				t.Errorf("replica: %d rows summing to %d, primary %d summing to %d", n, sum, wn, wsum)
			}
			procs, err := c.Processes(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var roles []string
			for _, p := range procs {
				if slices.Contains([]string{"extract", "pump", "collector", "replicat"}, p.Role) {
					roles = append(roles, p.Role)
				}
			}
			if !slices.Equal(roles, tc.roles) {
				t.Errorf("stage processes %v, want %v", roles, tc.roles)
			}
			// The stats files are written every 100 ms: the backlog drains.
			deadline := time.Now().Add(10 * time.Second)
			for {
				st, err := c.ReplicationState(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if len(st) == 1 && st[0].Kind == "pipeline" && st[0].Node == "dst" && st[0].Backlog == 0 && len(st[0].Positions) == positions(tc.roles) {
					t.Logf("state: %+v", st[0])
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("pipeline state after 10 s: %+v, want dst with no backlog", st)
				}
				time.Sleep(100 * time.Millisecond)
			}
			// A compressing pump (deflate, or zstd over TLS) sends fewer
			// bytes than the trail holds — once the rows above passed, not
			// over the first few records (the Up's marker: 136 trail bytes
			// took 145 deflated). The pump's counters are its stats file,
			// written every 100 ms: wait until they count the rows.
			if strings.Contains(tc.scheme, "compress") {
				var g map[string]float64
				for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
					gs, err := c.Gauges(ctx)
					if err != nil {
						t.Fatal(err)
					}
					g = map[string]float64{}
					for _, x := range gs {
						g[x.Name] = x.Value
					}
					if g["pump_trail_bytes"] >= 16<<10 || time.Now().After(deadline) {
						break
					}
				}
				if g["pump_trail_bytes"] < 16<<10 || g["pump_sent_bytes"] >= g["pump_trail_bytes"] {
					t.Errorf("the pump sent %.0f bytes for %.0f trail bytes; 500 rows compressed, want at least 16 KiB of trail sent in fewer bytes", g["pump_sent_bytes"], g["pump_trail_bytes"])
				}
			}
			// Faults on stages (StageControl.DoStage): each stage is killed while
			// rows are written, then started; a pause and a restart too.
			// Every change arrives: the copies agree afterwards. (The
			// remote configuration's stages are the same processes; a
			// MariaDB target's replicat is the one that differs.)
			stages := append(c.Stages("src"), c.Stages("dst")...)
			switch tc.name {
			case "remote":
				stages = nil
			case "mariadb":
				stages = []string{pipeline.KindReplicat}
			}
			for i, st := range stages {
				node := "dst"
				if st == pipeline.KindExtract {
					node = "src"
				}
				if err := c.DoStage(ctx, node, st, "kill"); err != nil {
					t.Fatalf("kill the %s: %v", st, err)
				}
				if err := c.pipelineDown(); err != nil {
					t.Errorf("a stage killed on purpose is taken for a failure: %v", err)
				}
				run(t, src, fmt.Sprintf("INSERT INTO acct SELECT g, g FROM generate_series(%d, %d) g", 1000+100*i, 1099+100*i),
					"UPDATE acct SET bal = bal * 2 WHERE id % 5 = 0")
				if err := c.DoStage(ctx, node, st, "start"); err != nil {
					t.Fatalf("start the %s: %v", st, err)
				}
				if err := c.DoStage(ctx, node, st, "pause"); err != nil {
					t.Fatalf("pause the %s: %v", st, err)
				}
				run(t, src, fmt.Sprintf("DELETE FROM acct WHERE id = %d", 1000+100*i))
				if err := c.DoStage(ctx, node, st, "resume"); err != nil {
					t.Fatalf("resume the %s: %v", st, err)
				}
				if err := c.DoStage(ctx, node, st, "restart"); err != nil {
					t.Fatalf("restart the %s: %v", st, err)
				}
				if err := c.WaitFlowing(ctx); err != nil {
					t.Fatalf("after faults on the %s: %v", st, err)
				}
				if err := src.QueryRow("SELECT count(*), sum(bal) FROM acct").Scan(&wn, &wsum); err != nil {
					t.Fatal(err)
				}
				if err := dst.QueryRow("SELECT count(*), coalesce(sum(bal), 0) FROM acct").Scan(&n, &sum); err != nil {
					t.Fatal(err)
				}
				if n != wn || sum != wsum {
					t.Errorf("after faults on the %s: replica %d rows summing to %d, primary %d summing to %d", st, n, sum, wn, wsum)
				}
			}
			if tc.name == "mariadb" {
				// The copies compare across engines, and a change made
				// at the target alone shows.
				sums, err := c.Checksums(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if s, d := sums["src"]["acct"], sums["dst"]["acct"]; s == 0 || s != d {
					t.Errorf("checksums of acct: src %d, dst %d; want equal", s, d)
				}
				run(t, dst, "UPDATE acct SET bal = bal + 1 WHERE id = 7")
				if sums, err = c.Checksums(ctx); err != nil || sums["src"]["acct"] == sums["dst"]["acct"] {
					t.Errorf("a row changed at the MariaDB target alone: checksums %v (%v), want them to differ", sums, err)
				}
				for _, n := range c.Nodes() {
					if n.Name == "dst" && (!strings.HasPrefix(n.Version, "MariaDB") || !strings.Contains(n.DSN, "@tcp(")) {
						t.Errorf("node dst: version %q, dsn %q; want MariaDB's", n.Version, n.DSN)
					}
				}
				procs, err := c.Processes(ctx)
				if err != nil {
					t.Fatal(err)
				}
				var mine int
				for _, p := range procs {
					if p.Node == "dst" && !slices.Contains([]string{"collector", "replicat"}, p.Role) {
						mine++
					}
				}
				if mine == 0 {
					t.Errorf("no MariaDB process at dst among %+v", procs)
				}
			}
			if st := c.Stages("src"); !slices.Equal(st, []string{"extract"}) {
				t.Errorf("the source's stages: %v, want its extract", st)
			}
			if err := c.DoStage(ctx, "src", "pump", "kill"); err == nil || !strings.Contains(err.Error(), "node src has no pump") {
				t.Errorf("a stage the node does not have: %v", err)
			}
			// A stage that dies stops the wait for a marker at once, with
			// the stage named, instead of after the minute a stalled
			// replication is given.
			for _, s := range c.pipeline.stages {
				if s.cfg.Kind == pipeline.KindReplicat {
					if err := s.proc.Signal(ctx, syscall.SIGKILL); err != nil {
						t.Fatal(err)
					}
				}
			}
			start := time.Now()
			err = c.WaitFlowing(ctx)
			if err == nil || !strings.Contains(err.Error(), "the replicat for dst exited (signal: killed)") {
				t.Errorf("WaitFlowing with the replicat killed: %v, want it named", err)
			}
			t.Logf("WaitFlowing failed after %.2f s: %v", time.Since(start).Seconds(), err)
		})
	}
}

// TestPipelineSchemeOptions: the pipeline's options are checked with the
// spec's lines; pump options without a pump are refused.
func TestPipelineSchemeOptions(t *testing.T) {
	base := `
[lab]
name = "x"
[site.a]
[site.b]
[[link]]
sites = ["a", "b"]
[engine]
kind = "postgres"
[node.p]
site = "a"
role = "primary"
[node.r]
site = "b"
role = "replica"
from = "p"
[scheme]
replication = "pipeline"
`
	for _, tc := range []struct{ extra, want string }{
		{"compress = 12\n", "scheme.compress"},
		{"pump = false\ncompress = 3\n", "compress is a pump option"},
		{"group_ops = 0\n", "scheme.group_ops"},
		{"refresh = \"10s\"\n", "scheme.refresh"},
		{"split = \"table\"\n", "set replicats = 2 or more"},
		{"replicats = 2\nsplit = \"row\"\n", "scheme.split"},
		{"compress = 3\ncodec = \"lz4\"\n", "scheme.codec"},
		{"codec = \"zstd\"\n", "set compress = 1 to 9"},
		{"pump = false\ntls = true\n", "tls is a pump option"},
		{"tls = \"yes\"\n", "scheme.tls"},
		{"target = \"oracle\"\n", "scheme.target"},
		{"target = \"mariadb\"\n[workload]\nkind = \"personnel\"\nreads_at = \"replica\"\n", "workload.reads_at: the replicas are MariaDB servers"},
	} {
		s, err := spec.Parse("p.toml", []byte(base+tc.extra))
		if err != nil {
			t.Fatalf("%q: %v", tc.extra, err)
		}
		_, err = makePlan(s)
		if err == nil || !containsAll(err.Error(), tc.want, "p.toml:") {
			t.Errorf("%q: error %v, want one naming %s with its line", tc.extra, err, tc.want)
		}
	}
}

// positions is how many positions the state names for a replica served by
// these stage roles: one per stage, two (bytes and LSN) per replicat.
func positions(roles []string) int {
	n := 0
	for _, r := range roles {
		n++
		if r == "replicat" {
			n++
		}
	}
	return n
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
