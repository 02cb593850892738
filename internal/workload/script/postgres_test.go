package script

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"replab/internal/driver"
	"replab/internal/engine"
	"replab/internal/engine/postgres/pgtest"
	"replab/internal/lab"
	"replab/internal/testkit"
	"replab/internal/workload"
)

// pgSpec is one primary with pg_stat_statements, and a client site 1 ms
// away. The workload's files are relative to this package (the spec is
// parsed from memory).
const pgSpec = `
[lab]
name = "NAME"
[site.db]
[site.client]
[[link]]
sites = ["db", "client"]
delay = "1ms"
[engine]
kind = "postgres"
[node.p1]
site = "db"
role = "primary"
[node.p1.settings]
shared_preload_libraries = "pg_stat_statements"
[workload]
kind = "script"
schema = "testdata/pgbench/schema.sql"
load = "testdata/pgbench/load.sql"
transactions = ["testdata/builtin/tpcb-like.sql", "testdata/builtin/simple-update.sql@0", "testdata/builtin/select-only.sql@0", "testdata/pgbench/gset.sql@0"]
[run]
seed = 5
`

// TestPostgresBuiltinScriptsSendWhatPgbenchSends loads pgbench's tables
// through the load file (COPY blocks and SQL), runs each built-in script
// through the driver (pipelined, as replab run would) for two seconds,
// then pgbench -M prepared for as many transactions, and compares the
// statements pg_stat_statements saw: the same statements (pgbench's
// prepared mode and replab's send the same text), each as many times;
// select-only without BEGIN, as pgbench sends it.
func TestPostgresBuiltinScriptsSendWhatPgbenchSends(t *testing.T) {
	t.Parallel()
	testkit.Need(t, testkit.Lab, testkit.Pgbench)
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pgbench")
	l, c := pgtest.Up(t, "wsc", pgSpec)
	ww, err := workload.NewRegistry(Factory).For(l.Spec, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	w := ww.(*Workload)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := c.(engine.SQL).ApplySchema(ctx, w.Schema()); err != nil {
		t.Fatal(err)
	}
	node := c.Nodes()[0]
	ld, err := c.(engine.BulkLoader).Loader(ctx, node.Name, node.Site)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Load(ctx, ld, func(int64) {}); err != nil {
		t.Fatal(err)
	}
	ld.Close()
	conn, err := pgx.ConnectConfig(ctx, pgtest.ConnConfig(t, l, node, node.Site))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var branches, tellers, accounts int
	if err := conn.QueryRow(ctx, "SELECT (SELECT count(*) FROM pgbench_branches), (SELECT count(*) FROM pgbench_tellers), (SELECT count(*) FROM pgbench_accounts)").Scan(&branches, &tellers, &accounts); err != nil {
		t.Fatal(err)
	}
	if branches != 1 || tellers != 10 || accounts != 100000 {
		t.Fatalf("loaded %d branches, %d tellers, %d accounts; want 1, 10, 100000", branches, tellers, accounts)
	}
	if _, err := conn.Exec(ctx, "CREATE EXTENSION pg_stat_statements"); err != nil {
		t.Fatal(err)
	}
	db, err := c.(engine.SQL).Open(ctx, node.Name, "client")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	pipe, _ := c.(engine.Pipeliner)

	// calls is what pg_stat_statements counted for the pgbench tables.
	calls := func() map[string]int64 {
		t.Helper()
		rows, err := conn.Query(ctx, "SELECT query, calls FROM pg_stat_statements WHERE (query LIKE '%pgbench\\_%' OR upper(query) IN ('BEGIN', 'COMMIT', 'END')) AND query NOT LIKE '%pg_stat_statements%'")
		if err != nil {
			t.Fatal(err)
		}
		out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (struct {
			q string
			n int64
		}, error) {
			var v struct {
				q string
				n int64
			}
			err := r.Scan(&v.q, &v.n)
			return v, err
		})
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]int64{}
		for _, v := range out {
			if q := strings.ToUpper(v.q); q == "BEGIN" || q == "COMMIT" || q == "END" {
				v.q = "BEGIN" // pgbench's BEGIN (its END is a COMMIT), replab's begin
				if q != "BEGIN" {
					continue
				}
			}
			m[v.q] += v.n
			if strings.HasPrefix(v.q, "UPDATE") {
				m["UPDATE"] += v.n // every UPDATE together, for gset.sql
			}
		}
		return m
	}
	reset := func() {
		t.Helper()
		if _, err := conn.Exec(ctx, "SELECT pg_stat_statements_reset()"); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("expressions", func(t *testing.T) { expressionsAsPgbench(ctx, t, bins[0], l.Site("client"), node.DSN) })
	const users = 2
	for _, name := range []string{"tpcb-like", "simple-update", "select-only", "gset"} {
		t.Run(name, func(t *testing.T) {
			var typ workload.TxType
			for _, tf := range w.txs {
				if tf.name == name {
					tf.weight = 1
					ws := &Workload{dialect: "postgres", scale: 1, seed: 5, users: map[int]*env{}, txs: []txFile{tf}}
					typ = ws.Transactions()[0]
				}
			}
			if name == "gset" {
				// gset.sql branches on the balance it read: the scripts before
				// it left some negative (tpcb-like adds -5000..5000), and with
				// the same seed replab draws the very accounts it changed, pgbench
				// others. From all zero, both take the first branch every time.
				if _, err := conn.Exec(ctx, "UPDATE pgbench_accounts SET abalance = 0 WHERE abalance < 0"); err != nil {
					t.Fatal(err)
				}
			}
			reset()
			res, err := driver.Run(ctx, driver.Config{Users: users, Duration: 2 * time.Second, Seed: 5, MaxRetries: 3,
				Pipeliner: pipe, Classify: func(err error) engine.ErrorClass { return engine.Classify(c, err) }},
				[]workload.TxType{typ}, driver.Sources(db))
			if err != nil {
				t.Fatal(err)
			}
			tr := res.Types[name]
			if tr == nil || tr.Count < 50 || len(tr.Errors) > 0 {
				t.Fatalf("replab: %+v", tr)
			}
			got := calls()
			t.Logf("replab: %d transactions (pipelined %t, autocommit %t): %v", tr.Count, typ.Batch != nil && pipe != nil && !typ.Autocommit, typ.Autocommit, got)

			reset()
			per := (tr.Count + users - 1) / users
			script, _ := filepath.Abs("testdata/builtin/" + name + ".sql")
			if name == "gset" {
				script, _ = filepath.Abs("testdata/pgbench/gset.sql")
			}
			out, err := runPgbench(ctx, bins[0], l.Site("client"), node.DSN, "-n", "-M", "prepared", "-c", strconv.Itoa(users), "-j", strconv.Itoa(users),
				"-t", strconv.FormatInt(per, 10), "-f", script)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			want := calls()
			t.Logf("pgbench: %d transactions: %v", per*users, want)
			// BEGINs: pg_stat_statements counts a prepared one once per
			// connection, and gset.sql has none where replab begins a
			// transaction (docs/workloads.md says so); but select-only
			// runs without any, as pgbench's.
			if name == "select-only" && got["BEGIN"] != 0 {
				t.Errorf("replab sent %d BEGINs for select-only", got["BEGIN"])
			}
			delete(got, "BEGIN")
			delete(want, "BEGIN")
			if len(got) != len(want) || len(want) == 0 {
				t.Fatalf("statements differ:\nreplab  %s\npgbench %s", keys(got), keys(want))
			}
			// replab's count is its committed transactions, plus at most
			// one unfinished per user when the time ran out; pgbench's is
			// its -t rounded up to the users. gset.sql's branches depend
			// on the data, which the runs before changed: there the
			// UPDATEs count together.
			for q, n := range want {
				if q == "UPDATE" && name != "gset" {
					continue // the sum, for gset.sql
				}
				g, ok := got[q]
				if name == "gset" && strings.HasPrefix(q, "UPDATE") {
					g, n = got["UPDATE"], want["UPDATE"]
				}
				if !ok || g < tr.Count || g > tr.Count+users || n != per*users {
					t.Errorf("%q: replab %d calls for %d transactions, pgbench %d for %d", q, g, tr.Count, n, per*users)
				}
			}
		})
	}
}

func keys(m map[string]int64) string {
	var k []string
	for q, n := range m {
		k = append(k, fmt.Sprintf("%q×%d", q, n))
	}
	sort.Strings(k)
	return strings.Join(k, "\n        ")
}

// runPgbench runs pgbench in site against dsn; killed with the test.
func runPgbench(ctx context.Context, bin string, site *lab.Site, dsn string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(args, dsn)...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C"}
	cmd.Dir = "/"
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := site.Start(cmd); err != nil {
		return "", err
	}
	err := cmd.Wait()
	return out.String(), err
}

// pgbenchExprs are evaluated by pgbench (through its debug()) and by
// replab, and must give the same type and value.
var pgbenchExprs = []string{
	"7 / 2", "-7 / 2", "7 / -2", "7 % 3", "-7 % 3", "7 % -3", "5 % -1", "7.0 / 2", "1 + 2 * 3 - 4",
	"-2 * 3", "~1 + 2", "~0", "1 | 2 + 3", "5 & 3", "5 # 3", "1 << 4", "-16 >> 2",
	"not 1 = 2 and 3 > 2 or false", "null + 1", "null is null", "1 is not null", "1 isnull", "true is true",
	"abs(-5)", "abs(-2.5)", "least(3, 1, 2)", "greatest(3, 1.5, 2)", "int(5.9)", "int(-5.9)", "int(2.5)", "int(3.5)", "7.5 % 2", "double(5)",
	"sqrt(16)", "pi()", "pow(2, 10)", "ln(exp(1))", "1e3 + .5", "case when 1 > 2 then 10 when 2 > 1 then 20 else 30 end",
	"case when false then 1 end", "hash(10, 5432)", "hash_fnv1a(10, 5432)", "hash_murmur2(-1, 0)", "random(5, 5)",
	"1 = 1.0", "1 != 2", "2 <= 1", "9223372036854775807 / -1",
}

// expressionsAsPgbench runs one pgbench transaction whose script prints
// every expression with debug(), and compares with replab's values.
func expressionsAsPgbench(ctx context.Context, t *testing.T, bin string, site *lab.Site, dsn string) {
	var b strings.Builder
	for i, e := range pgbenchExprs {
		fmt.Fprintf(&b, "\\set x%d debug(%s)\n", i, e)
	}
	b.WriteString("SELECT 1;\n")
	dir := t.TempDir()
	path := filepath.Join(dir, "exprs.sql")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := runPgbench(ctx, bin, site, dsn, "-n", "-t", "1", "-f", path)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var got []string
	for _, line := range strings.Split(out, "\n") {
		if i := strings.Index(line, "debug(script=0,command="); i >= 0 {
			got = append(got, line[strings.Index(line[i:], ": ")+i+2:])
		}
	}
	if len(got) != len(pgbenchExprs) {
		t.Fatalf("pgbench printed %d values for %d expressions:\n%s", len(got), len(pgbenchExprs), out)
	}
	for i, e := range pgbenchExprs {
		v, err := evalText(t, e, nil)
		if err != nil {
			t.Errorf("%s: %v (pgbench: %s)", e, err, got[i])
			continue
		}
		want := map[kind]string{kNull: "null", kBool: "boolean ", kInt: "int ", kDouble: "double "}[v.k]
		if v.k != kNull {
			want += v.String()
		}
		if got[i] != want {
			t.Errorf("%s: replab %q, pgbench %q", e, want, got[i])
		}
	}
}
