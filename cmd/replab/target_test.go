package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"replab/internal/engine"
	"replab/internal/engine/mariadb"
	"replab/internal/engine/postgres/pgtest"
	"replab/internal/lab"
	"replab/internal/labtest"
	"replab/internal/report"
	"replab/internal/testkit"
)

// The target-mode tests measure a lab's PostgreSQL cluster as a user
// measures a remote one: the replab binary runs in a site of its own, as
// an unprivileged user, against the servers' addresses.

// targetLab is a primary with two standbys, and a client site with links
// to each. Client → primary is 5 ms, primary → eu 15 ms, primary → asia
// 30 ms: a change committed from the client is visible at e1 about 20 ms
// after COMMIT is sent, at a1 about 35 ms. The client's links to the
// replicas are slower than the way through the primary, so that the lab
// routes replication directly.
const targetLab = `
[lab]
name = "NAME"

[site.primary]
[site.eu]
[site.asia]
[site.client]

[[link]]
sites = ["primary", "eu"]
delay = "15ms"

[[link]]
sites = ["primary", "asia"]
delay = "30ms"

[[link]]
sites = ["client", "primary"]
delay = "5ms"

[[link]]
sites = ["client", "eu"]
delay = "20ms"

[[link]]
sites = ["client", "asia"]
delay = "35ms"

[engine]
kind = "postgres"

[node.p1]
site = "primary"
role = "primary"

[node.e1]
site = "eu"
role = "standby"
from = "p1"

[node.a1]
site = "asia"
role = "standby"
from = "p1"
`

// targetRun is the same workload and run for the lab and the target.
const targetRun = `
[workload]
kind = "personnel"

[run]
users = 4
rate = "40/s"
warmup = "3s"
duration = "6s"
cooldown = "1s"
lag_sample = 1
`

// oneWay is the configured one-way delay from the client to each replica:
// what the remote poll's correction must find.
var oneWay = map[string]time.Duration{"e1": 20 * time.Millisecond, "a1": 35 * time.Millisecond}

// targetSpec writes a [target] spec for the lab's nodes; edit changes
// its text (a wrong topology, another DSN) before it is written.
func targetSpec(t *testing.T, dir string, nodes []engine.Node, head string, edit func(string) string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(head)
	for _, n := range nodes {
		fmt.Fprintf(&b, "\n[target.node.%s]\nrole = %q\ndsn = %q\nsite = %q\n", n.Name, n.Role, n.DSN, n.Site)
		if n.From != "" {
			fmt.Fprintf(&b, "from = %q\n", n.From)
		}
	}
	b.WriteString(targetRun)
	text := b.String()
	if edit != nil {
		text = edit(text)
	}
	f, err := os.CreateTemp(dir, "target-*.toml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
	_ = f.Chmod(0o644)
	return f.Name()
}

// runInSite runs the replab binary in site's namespace as nobody: a user
// on a host of the client's site, without root.
func runInSite(t *testing.T, l *lab.Lab, site string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	st := l.Site(site)
	if st == nil {
		t.Fatalf("no site %s", site)
	}
	all := append([]string{"netns", "exec", st.Netns, "setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", binPath}, args...)
	cmd := exec.CommandContext(ctx, "ip", all...)
	cmd.Dir = os.TempDir()
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	case err != nil:
		t.Fatalf("run replab %v: %v", args, err)
	}
	return string(out), 0
}

// openDir is a directory nobody may write results into.
func openDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	if err := os.Chmod(d, 0o777); err != nil {
		t.Fatal(err)
	}
	for p := filepath.Dir(d); p != "/" && p != "."; p = filepath.Dir(p) {
		_ = os.Chmod(p, 0o755) // t.TempDir's parents are 0700
		if p == os.TempDir() {
			break
		}
	}
	return d
}

func readSummary(t *testing.T, dir string) *report.Summary {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s report.Summary
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return &s
}

// schemas lists the schemas at the primary that are not PostgreSQL's own.
func schemas(t *testing.T, l *lab.Lab, p engine.Node) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, pgtest.ConnConfig(t, l, p, p.Site))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg\_%' AND nspname NOT IN ('information_schema', 'public') ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func execAt(t *testing.T, l *lab.Lab, n engine.Node, stmts ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, pgtest.ConnConfig(t, l, n, n.Site))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, q := range stmts {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// TestTargetMode: a cluster measured in target mode from the client site
// by nobody: bad specs refused with clear errors and nothing changed; then
// a lab-mode run of the same cluster, for the lag it measures with one
// clock beside each replica, and two target runs whose lag, polled across
// the links and corrected or read through agents, agrees with the lab's.
func TestTargetMode(t *testing.T) {
	t.Parallel()
	pgtest.Require(t)

	l, c := pgtest.Up(t, "tg", targetLab)
	nodes := c.Nodes()
	primary := engine.Sources(nodes)[0]
	var e1 engine.Node
	for _, n := range nodes {
		if n.Name == "e1" {
			e1 = n
		}
	}
	if !strings.Contains(e1.DSN, "port=5432") {
		t.Fatalf("e1's DSN %q: the test changes its port=5432", e1.DSN)
	}
	dir := openDir(t)
	head := "[target]\nname = \"tg\"\nengine = \"postgres\"\nsite = \"client\"\ncreate_schema = true\n"

	refused := []struct {
		name string
		head string
		edit func(string) string
		want []string
	}{
		{"wrong topology", head, func(s string) string {
			i := strings.LastIndex(s, `from = "p1"`) // a1's, the last node
			return s[:i] + `from = "e1"` + s[i+len(`from = "p1"`):]
		}, []string{"node a1 (", "the spec says it replicates from e1", "that is node p1"}},
		{"unreachable node", head, func(s string) string {
			return strings.Replace(s, e1.DSN, strings.Replace(e1.DSN, "port=5432", "port=5999", 1), 1)
		}, []string{fmt.Sprintf("node e1 (%s:5999): cannot connect", e1.Addr.Addr())}},
		{"missing permission", head, func(s string) string { return strings.ReplaceAll(s, "user=postgres", "user=tg_reader") },
			[]string{"user tg_reader may not create schemas in database replab", "GRANT CREATE ON DATABASE replab TO tg_reader"}},
		{"existing table", head, nil, []string{"schema replab exists and holds tables (mine)", "will not overwrite"}},
		{"no schema, may not create", strings.Replace(head, "create_schema = true", "create_schema = false", 1), nil,
			[]string{"schema replab does not exist, and replab may not create it"}},
	}
	// A role that may log in and read replication state, but not create.
	execAt(t, l, primary, `CREATE ROLE tg_reader LOGIN`, `GRANT pg_monitor TO tg_reader`)
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "existing table" {
				execAt(t, l, primary, `CREATE SCHEMA replab`, `CREATE TABLE replab.mine (k int PRIMARY KEY)`, `INSERT INTO replab.mine VALUES (7)`)
				defer execAt(t, l, primary, `DROP SCHEMA replab CASCADE`)
			}
			before := schemas(t, l, primary)
			spec := targetSpec(t, dir, nodes, tc.head, tc.edit)
			out, code := runInSite(t, l, "client", "run", spec, "--out", filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")))
			if code == 0 {
				t.Fatalf("exit 0, want a refusal\n%s", out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			if strings.Contains(out, "goroutine ") || strings.Contains(out, "panic") {
				t.Errorf("a stack trace for a user error:\n%s", out)
			}
			if after := schemas(t, l, primary); strings.Join(after, ",") != strings.Join(before, ",") {
				t.Errorf("schemas at the primary went from %v to %v: a refused run changed the server", before, after)
			}
		})
	}
	if t.Failed() {
		return
	}

	// The three measurements: the lab's own, as replab run does it (its
	// users in the client site too), then the cluster in target mode with
	// lag polled from the client site, then through an agent beside each
	// standby, each agent told its clock is off by a known amount. They
	// compare commit latency with the round trip and lags with the lab's,
	// so they run with the machine to themselves, one after another (one
	// wait for the other tests to finish, not three).
	labSpec, _ := writeSpecText(t, "tl", targetLab+strings.Replace(targetRun, "[run]\n", "[run]\nclient = \"client\"\n", 1))
	labOut := t.TempDir()
	spec := targetSpec(t, dir, nodes, head, nil)
	res := filepath.Join(dir, "remote")
	token := filepath.Join(dir, "agent.token")
	if err := os.WriteFile(token, []byte("a-token-of-the-test-0123456789\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	skew := map[string]time.Duration{"e1": 300 * time.Millisecond, "a1": -250 * time.Millisecond}
	agents := map[string]string{}
	for _, n := range nodes {
		if d, ok := skew[n.Name]; ok {
			agents[n.Name] = startAgent(t, l, n, token, d)
		}
	}
	agentSpec := targetSpec(t, dir, nodes, head+fmt.Sprintf("agent_token_file = %q\n", token), func(s string) string {
		for name, addr := range agents {
			s = strings.Replace(s, "[target.node."+name+"]\n", fmt.Sprintf("[target.node.%s]\nagent = %q\n", name, addr), 1)
		}
		return s
	})
	agentRes := filepath.Join(dir, "agents")
	var labText, remoteText, agentText string
	var labCode, targetCode, agentCode int
	testkit.Alone(t, func() {
		labText, labCode = replab(t, "", "run", labSpec, "--out", labOut)
		if labCode != 0 {
			return
		}
		remoteText, targetCode = runInSite(t, l, "client", "run", spec, "--out", res)
		if targetCode != 0 {
			return
		}
		agentText, agentCode = runInSite(t, l, "client", "run", agentSpec, "--out", agentRes)
	})
	if labCode != 0 {
		t.Fatalf("lab-mode run: exit %d\n%s", labCode, labText)
	}
	labSum := readSummary(t, labOut)
	out, code := remoteText, targetCode
	if code != 0 {
		t.Fatalf("target run: exit %d\n%s", code, out)
	}
	if got := schemas(t, l, primary); len(got) != 0 {
		t.Errorf("schemas left at the primary after the runs: %v", got)
	}
	sum := readSummary(t, res)
	if !sum.Complete || sum.Transactions == 0 {
		t.Fatalf("target run: complete %v, %d transactions", sum.Complete, sum.Transactions)
	}
	// Both pipeline personnel's update: BEGIN, UPDATE and COMMIT in one
	// round trip of the client's 10 ms to the primary, where statement by
	// statement takes three (30 ms).
	for mode, s := range map[string]*report.Summary{"lab": labSum, "target": sum} {
		if p50 := s.CommitLatency.P50; p50 < 10 || p50 > 18 {
			t.Errorf("%s mode: commit latency p50 %.2f ms, want one 10 ms round trip (pipelined), not three", mode, p50)
		}
	}
	for name, ow := range oneWay {
		rep, lr := sum.Replicas[name], labSum.Replicas[name]
		if rep == nil || lr == nil || rep.LagClock == nil {
			t.Fatalf("replica %s: target %+v, lab %+v: want both, the target's with lag_clock", name, rep, lr)
		}
		lc := rep.LagClock
		if lc.Method != "remote-poll" {
			t.Errorf("%s: lag clock %q, want remote-poll", name, lc.Method)
		}
		// Half the smallest poll round trip: the configured one-way delay
		// plus a little of the server's and the machine's time.
		if want := float64(ow) / 1e6; lc.CorrectionMs < want-0.5 || lc.CorrectionMs > want+10 {
			t.Errorf("%s: one-way correction %.2f ms, want the link's %.0f ms (+ up to 10 ms)", name, lc.CorrectionMs, want)
		}
		// The remote lag is an upper bound late by up to one poll interval
		// (a round trip to the replica) and the correction's bound; the
		// lab's by up to its own interval.
		diff := rep.LagMs.P50 - lr.LagMs.P50
		slack := lc.BoundMs + 2
		if diff < -slack || diff > rep.ResolutionMs+lr.ResolutionMs+slack {
			t.Errorf("%s: lag p50 %.2f ms in target mode, %.2f ms in the lab (bound ± %.2f ms, resolutions %.2f and %.2f ms): they disagree",
				name, rep.LagMs.P50, lr.LagMs.P50, lc.BoundMs, rep.ResolutionMs, lr.ResolutionMs)
		}
		if math.IsNaN(diff) {
			t.Errorf("%s: no lag", name)
		}
		t.Logf("%s: lag p50 target %.2f ms (resolution %.2f, correction %.2f ± %.2f), lab %.2f ms", name, rep.LagMs.P50, rep.ResolutionMs, lc.CorrectionMs, lc.BoundMs, lr.LagMs.P50)
	}

	// The same through the agents.
	out, code = agentText, agentCode
	if code != 0 {
		t.Fatalf("target run with agents: exit %d\n%s", code, out)
	}
	res = agentRes
	sum = readSummary(t, res)
	if !sum.Complete || sum.Transactions == 0 {
		t.Fatalf("target run with agents: complete %v, %d transactions", sum.Complete, sum.Transactions)
	}
	for name, d := range skew {
		rep, lr := sum.Replicas[name], labSum.Replicas[name]
		if rep == nil || rep.LagClock == nil || rep.LagClock.Method != "agent" {
			t.Fatalf("replica %s: %+v, want lag from its agent", name, rep)
		}
		lc := rep.LagClock
		// The agent's clock is the machine's plus d: the estimate must hold
		// it within its bound.
		if diff := lc.CorrectionMs - float64(d)/1e6; math.Abs(diff) > lc.BoundMs {
			t.Errorf("%s: clock offset estimated %.3f ms ± %.3f ms, but it is %v", name, lc.CorrectionMs, lc.BoundMs, d)
		}
		diff := rep.LagMs.P50 - lr.LagMs.P50
		slack := lc.BoundMs + 2
		if diff < -slack || diff > rep.ResolutionMs+lr.ResolutionMs+slack {
			t.Errorf("%s: lag p50 %.2f ms through the agent, %.2f ms in the lab (bound ± %.2f ms, resolutions %.2f and %.2f ms): they disagree",
				name, rep.LagMs.P50, lr.LagMs.P50, lc.BoundMs, rep.ResolutionMs, lr.ResolutionMs)
		}
		t.Logf("%s: lag p50 agent %.2f ms (resolution %.2f, offset %.3f ± %.3f ms), lab %.2f ms", name, rep.LagMs.P50, rep.ResolutionMs, lc.CorrectionMs, lc.BoundMs, lr.LagMs.P50)
	}
}

// startAgent runs replab agent as nobody in node's site, its clock said
// to be off by skew, and returns its address; it is stopped when the
// test ends.
func startAgent(t *testing.T, l *lab.Lab, n engine.Node, token string, skew time.Duration) string {
	t.Helper()
	addr := fmt.Sprintf("%s:7070", n.Addr.Addr())
	cmd := exec.Command("ip", "netns", "exec", l.Site(n.Site).Netns, "setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
		binPath, "agent", "--listen", addr, "--engine", "postgres", "--dsn", n.DSN, "--token-file", token, "--clock-offset", skew.String())
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	rd := bufio.NewReader(stdout)
	line, err := rd.ReadString('\n')
	if err != nil || !strings.Contains(line, "listening on") {
		t.Fatalf("agent at %s: %q, %v", addr, line, err)
	}
	go func() { _, _ = io.Copy(io.Discard, rd) }()
	return addr
}

// writeSpecText writes spec text under a unique lab name (its [lab] says
// name = "NAME").
func writeSpecText(t *testing.T, prefix, text string) (path, name string) {
	t.Helper()
	name = fmt.Sprintf("c%s-%d-%04x", prefix, os.Getpid()%10000, time.Now().UnixNano()%0x10000)
	path = filepath.Join(t.TempDir(), "lab.toml")
	if err := os.WriteFile(path, []byte(strings.Replace(text, `name = "NAME"`, fmt.Sprintf("name = %q", name), 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, name
}

// TestTargetModeMariaDB: a MariaDB primary and a replica measured as a
// target from a client site by nobody, the password in a file.
func TestTargetModeMariaDB(t *testing.T) {
	t.Parallel()
	testkit.Need(t, testkit.Lab, testkit.MariaDB)
	l, c := labtest.Cluster(t, mariadb.Engine{}, "tm", `
[lab]
name = "NAME"

[site.primary]
[site.eu]
[site.client]

[[link]]
sites = ["primary", "eu"]
delay = "15ms"

[[link]]
sites = ["client", "primary"]
delay = "5ms"

[[link]]
sites = ["client", "eu"]
delay = "20ms"

[engine]
kind = "mariadb"

[node.p1]
site = "primary"
role = "primary"

[node.e1]
site = "eu"
role = "replica"
from = "p1"
`)
	dir := openDir(t)
	var nodes []engine.Node
	password := ""
	for _, n := range c.Nodes() {
		cfg, err := mysql.ParseDSN(n.DSN)
		if err != nil {
			t.Fatal(err)
		}
		password, cfg.Passwd = cfg.Passwd, ""
		n.DSN = cfg.FormatDSN()
		nodes = append(nodes, n)
	}
	pwFile := filepath.Join(dir, "password")
	if err := os.WriteFile(pwFile, []byte(password+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	head := fmt.Sprintf("[target]\nname = \"tm\"\nengine = \"mariadb\"\nsite = \"client\"\nschema = \"replab_t\"\ncreate_schema = true\npassword_file = %q\n", pwFile)

	// The lab's own database is called replab: in use, so refused.
	spec := targetSpec(t, dir, nodes, strings.Replace(head, "schema = \"replab_t\"\n", "", 1), nil)
	out, code := runInSite(t, l, "client", "run", spec, "--out", filepath.Join(dir, "refused"))
	if code == 0 || !strings.Contains(out, "database replab exists") {
		t.Errorf("a target whose schema exists: exit %d, want a refusal naming database replab:\n%s", code, out)
	}
	swapped := slices.Clone(nodes)
	for i := range swapped {
		if swapped[i].Name == "p1" {
			swapped[i].Role, swapped[i].From = "replica", "e1"
		} else {
			swapped[i].Role, swapped[i].From = "primary", ""
		}
	}
	spec = targetSpec(t, dir, swapped, head, nil)
	out, code = runInSite(t, l, "client", "run", spec, "--out", filepath.Join(dir, "swapped"))
	if code == 0 || !strings.Contains(out, "node e1 (") || !strings.Contains(out, "the spec says primary, but the server is a replica") {
		t.Errorf("primary and replica swapped: exit %d, want a refusal:\n%s", code, out)
	}

	spec = targetSpec(t, dir, nodes, head, nil)
	res := filepath.Join(dir, "run")
	out, code = runInSite(t, l, "client", "run", spec, "--out", res)
	if code != 0 {
		t.Fatalf("target run: exit %d\n%s", code, out)
	}
	if strings.Contains(out, password) {
		t.Errorf("the output shows the password")
	}
	sum := readSummary(t, res)
	rep := sum.Replicas["e1"]
	if !sum.Complete || sum.Transactions == 0 || rep == nil || rep.LagClock == nil || rep.Tracked == 0 {
		t.Fatalf("target run: complete %v, %d transactions, e1 %+v", sum.Complete, sum.Transactions, rep)
	}
	if lc := rep.LagClock; lc.CorrectionMs < 19.5 || lc.CorrectionMs > 30 {
		t.Errorf("e1: one-way correction %.2f ms, want the link's 20 ms (+ up to 10 ms)", lc.CorrectionMs)
	}
	// Lag from the client: 5 ms to the primary, 15 ms on to e1.
	if rep.LagMs.P50 < 19 {
		t.Errorf("e1: lag p50 %.2f ms, below the 20 ms the links take", rep.LagMs.P50)
	}
	st, err := os.ReadFile(filepath.Join(dir, "run", "summary.json"))
	if err == nil && strings.Contains(string(st), password) {
		t.Errorf("summary.json holds the password")
	}
	db, err := c.(engine.SQL).Open(context.Background(), "p1", "primary")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = 'replab_t'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("database replab_t after the run: %d (%v), want it dropped", n, err)
	}
	t.Logf("e1: lag p50 %.2f ms, resolution %.2f ms, correction %.2f ± %.2f ms", rep.LagMs.P50, rep.ResolutionMs, rep.LagClock.CorrectionMs, rep.LagClock.BoundMs)
}

// TestTargetModeGalera: three Galera masters (the fewest the engine
// builds: two leave no majority when one is cut off) measured as a target:
// a desynced member refused, then a run
// writing at every master whose lag each master reads for the others'
// writers.
func TestTargetModeGalera(t *testing.T) {
	t.Parallel()
	testkit.Need(t, testkit.Lab, testkit.MariaDB, testkit.Galera)
	l, c := labtest.Cluster(t, mariadb.Engine{}, "tgal", `
[lab]
name = "NAME"

[site.a]
[site.b]
[site.c]
[site.client]

[[link]]
sites = ["a", "b"]
delay = "10ms"

[[link]]
sites = ["a", "c"]
delay = "10ms"

[[link]]
sites = ["b", "c"]
delay = "10ms"

[[link]]
sites = ["client", "a"]
delay = "5ms"

[[link]]
sites = ["client", "b"]
delay = "5ms"

[[link]]
sites = ["client", "c"]
delay = "5ms"

[engine]
kind = "mariadb"

[node.g1]
site = "a"
role = "master"

[node.g2]
site = "b"
role = "master"

[node.g3]
site = "c"
role = "master"

[scheme]
replication = "galera"
gcache_size = "32M"
`)
	dir := openDir(t)
	var nodes []engine.Node
	password := ""
	for _, n := range c.Nodes() {
		cfg, err := mysql.ParseDSN(n.DSN)
		if err != nil {
			t.Fatal(err)
		}
		password, cfg.Passwd = cfg.Passwd, ""
		n.DSN = cfg.FormatDSN()
		nodes = append(nodes, n)
	}
	pwFile := filepath.Join(dir, "password")
	if err := os.WriteFile(pwFile, []byte(password+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	head := fmt.Sprintf("[target]\nname = \"tgal\"\nengine = \"mariadb\"\nsite = \"client\"\nschema = \"replab_t\"\ncreate_schema = true\npassword_file = %q\n", pwFile)

	// A desynced member (as during a backup) is not measured: its lag
	// would be the donor's, not the cluster's.
	g3, err := c.(engine.SQL).Open(context.Background(), "g3", "c")
	if err != nil {
		t.Fatal(err)
	}
	defer g3.Close()
	if _, err := g3.Exec("SET GLOBAL wsrep_desync = ON"); err != nil {
		t.Fatal(err)
	}
	spec := targetSpec(t, dir, nodes, head, nil)
	out, code := runInSite(t, l, "client", "run", spec, "--out", filepath.Join(dir, "desynced"))
	if code == 0 || !strings.Contains(out, "node g3 (") || !strings.Contains(out, "Desynced") {
		t.Errorf("a desynced Galera member: exit %d, want a refusal naming g3:\n%s", code, out)
	}
	if _, err := g3.Exec("SET GLOBAL wsrep_desync = OFF"); err != nil {
		t.Fatal(err)
	}
	// Back to Joined, then Synced once it has caught up.
	for state, start := "", time.Now(); state != "Synced"; time.Sleep(100 * time.Millisecond) {
		var name string
		if err := g3.QueryRow("SHOW GLOBAL STATUS LIKE 'wsrep_local_state_comment'").Scan(&name, &state); err != nil {
			t.Fatal(err)
		}
		if time.Since(start) > time.Minute {
			t.Fatalf("g3 still %s a minute after wsrep_desync = OFF", state)
		}
	}

	spec = targetSpec(t, dir, nodes, head, nil)
	res := filepath.Join(dir, "run")
	out, code = runInSite(t, l, "client", "run", spec, "--out", res)
	if code != 0 {
		t.Fatalf("target run: exit %d\n%s", code, out)
	}
	sum := readSummary(t, res)
	if !sum.Complete || sum.Transactions == 0 {
		t.Fatalf("target run: complete %v, %d transactions", sum.Complete, sum.Transactions)
	}
	for _, name := range []string{"g1", "g2", "g3"} {
		rep := sum.Replicas[name]
		if rep == nil || rep.LagClock == nil || rep.Tracked == 0 {
			t.Fatalf("master %s: %+v, want lag for the other master's writers", name, rep)
		}
		// A write-set goes from the client (5 ms) to its master and on to
		// the others (10 ms) before it commits: at least 15 ms.
		if rep.LagMs.P50 < 14 {
			t.Errorf("%s: lag p50 %.2f ms, below the 15 ms the links take", name, rep.LagMs.P50)
		}
		t.Logf("%s: lag p50 %.2f ms, %d tracked, resolution %.2f ms", name, rep.LagMs.P50, rep.Tracked, rep.ResolutionMs)
	}
}
