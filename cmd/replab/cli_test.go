package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"replab/internal/lab"
	"replab/internal/testkit"
)

// binPath is the replab binary built once for these tests.
var binPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "replab-cli-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	_ = os.Chmod(dir, 0o755) // so the not-root test can run it as nobody
	binPath = filepath.Join(dir, "replab")
	out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build replab: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// replab runs the binary with a private state root and returns its
// combined output and exit code.
func replab(t *testing.T, state string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if state != "" {
		args = append(args[:len(args):len(args)], "--state", state)
	}
	cmd := exec.CommandContext(ctx, binPath, args...)
	out, err := cmd.CombinedOutput()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run replab %v: %v", args, err)
	}
	return string(out), code
}

// writeSpec writes examples/two-sites.toml under a unique lab name.
func writeSpec(t *testing.T, prefix string) (path, name string) {
	return writeExample(t, "two-sites", prefix)
}

// writeExample copies examples/NAME.toml under a unique lab name.
func writeExample(t *testing.T, example, prefix string) (path, name string) {
	t.Helper()
	b, err := os.ReadFile("../../examples/" + example + ".toml")
	if err != nil {
		t.Fatal(err)
	}
	name = fmt.Sprintf("c%s-%d-%04x", prefix, os.Getpid()%10000, rand.IntN(0x10000))
	text := strings.Replace(string(b), fmt.Sprintf("name = %q", example), fmt.Sprintf("name = %q", name), 1)
	path = filepath.Join(t.TempDir(), "lab.toml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, name
}

// labUp starts `replab lab up` and waits for "ready".
func labUp(t *testing.T, spec, state string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(binPath, "lab", "up", spec, "--state", state)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_ = cmd.Wait()
		}
	})
	ready := make(chan []string, 1)
	go func() {
		var lines []string
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines = append(lines, sc.Text())
			if sc.Text() == "ready" {
				ready <- lines
				break
			}
		}
		for sc.Scan() {
		}
		close(ready)
	}()
	select {
	case lines, ok := <-ready:
		if !ok {
			t.Fatal("lab up exited before printing ready")
		}
		t.Logf("lab up printed:\n%s", strings.Join(lines, "\n"))
	case <-time.After(3 * time.Minute):
		t.Fatal("lab up did not print ready within 3 minutes")
	}
	return cmd
}

func netnsLeft(name string) []string {
	m, _ := filepath.Glob("/run/netns/" + lab.NamePrefix + name + ".*")
	return m
}

func TestLabUpStatusExecLinkSetAndSignal(t *testing.T) {
	t.Parallel()
	testkit.Need(t, testkit.Lab)
	state := t.TempDir()
	spec, name := writeSpec(t, "up")
	cmd := labUp(t, spec, state)

	out, code := replab(t, state, "lab", "status", "--json")
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, out)
	}
	var st lab.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status --json is not JSON: %v\n%s", err, out)
	}
	if st.Name != name || len(st.Sites) != 2 || st.Sites[0].Address == "" || len(st.Links) != 1 || len(st.Links[0].Directions) != 2 {
		t.Fatalf("status: %+v", st)
	}

	out, code = replab(t, "", "exec", "--state", state, "eu", "--", "sh", "-c", "ip -br addr show wan0; exit 7")
	if code != 7 {
		t.Errorf("exec exit status %d, want the command's 7 (output %s)", code, out)
	}
	if !strings.Contains(out, st.Sites[1].Address) {
		t.Errorf("exec did not run inside eu (%s): %s", st.Sites[1].Address, out)
	}

	out, code = replab(t, state, "link", "set", "primary->eu", "delay=80ms", "rate=2mbit", "loss=1%")
	if code != 0 || !strings.Contains(out, "delay=80ms") || !strings.Contains(out, "rate=2mbit") {
		t.Errorf("link set: exit %d: %s", code, out)
	}
	out, _ = replab(t, state, "link", "show", "--json")
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatal(err)
	}
	for _, d := range st.Links[0].Directions {
		want := 25 * time.Millisecond
		if d.From == "primary" {
			want = 80 * time.Millisecond
		}
		if d.Params.Delay != want {
			t.Errorf("%s->%s delay %v after link set, want %v", d.From, d.To, d.Params.Delay, want)
		}
	}
	out, code = replab(t, state, "link", "set", "primary<->eu", "delay=80")
	if code == 0 || !strings.Contains(out, "unit") {
		t.Errorf("link set delay=80: exit %d, want an error about the unit: %s", code, out)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("lab up after SIGTERM: %v", err)
	}
	if left := netnsLeft(name); len(left) > 0 {
		t.Errorf("namespaces left after SIGTERM: %v", left)
	}
	if _, err := os.Stat(filepath.Join(state, name)); err == nil {
		t.Errorf("state dir left after SIGTERM")
	}
}

func TestKilledLabIsRemovedByLabDown(t *testing.T) {
	t.Parallel()
	testkit.Need(t, testkit.Lab)
	state := t.TempDir()
	spec, name := writeSpec(t, "kill")
	cmd := labUp(t, spec, state)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if len(netnsLeft(name)) != 2 {
		t.Fatalf("after kill -9 the namespaces should still be there, found %v", netnsLeft(name))
	}
	out, code := replab(t, state, "lab", "down", name)
	if code != 0 {
		t.Fatalf("lab down: exit %d: %s", code, out)
	}
	if left := netnsLeft(name); len(left) > 0 {
		t.Errorf("namespaces left after lab down: %v\n%s", left, out)
	}
	out, code = replab(t, state, "lab", "down", name)
	if code != 0 || !strings.Contains(out, "nothing to remove") {
		t.Errorf("second lab down: exit %d: %s", code, out)
	}
}

func TestUserErrorsAreOneLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(bad, []byte("[lab]\nname = \"x\"\n[site.a]\n[site.b]\n[[link]]\nsites = [\"a\", \"b\"]\ndelay = \"80\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"bad unit names file and line", []string{"validate", bad}, "bad.toml:7"},
		{"missing file", []string{"validate", filepath.Join(dir, "nope.toml")}, "nope.toml"},
		{"unknown command", []string{"frobnicate"}, "unknown command"},
		{"link set needs a direction", []string{"link", "set", "primary", "delay=1ms"}, "not a link direction"},
		{"exec needs a command", []string{"exec", "eu"}, "give a site and a command"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, code := replab(t, "", c.args...)
			if code == 0 || !strings.Contains(out, c.want) {
				t.Errorf("exit %d, output %q: want non-zero and %q", code, out, c.want)
			}
			if strings.Contains(out, "goroutine ") || strings.Contains(out, "panic") {
				t.Errorf("stack trace for a user error: %s", out)
			}
		})
	}
}

func TestNotRootIsOneLineError(t *testing.T) {
	testkit.Need(t, testkit.Root)
	cmd := exec.Command(binPath, "lab", "up", "../../examples/two-sites.toml")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "needs root") || strings.Count(strings.TrimSpace(string(out)), "\n") > 1 {
		t.Errorf("as nobody: err %v, output %q: want a short 'needs root' error", err, out)
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--help"}, {"lab", "up", "--help"}, {"link"}, {"exec", "--help"}} {
		out, code := replab(t, "", args...)
		if code != 0 || !strings.Contains(out, "Usage") && !strings.Contains(out, "replab") {
			t.Errorf("%v: exit %d: %s", args, code, out)
		}
	}
	// Every command's --help: its own usage, once, naming every option.
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"run", "--help"}, []string{"replab run FILE", "-out"}},
		{[]string{"version", "--help"}, []string{"replab version"}},
		{[]string{"link", "show", "--help"}, []string{"replab link show", "-json"}},
		{[]string{"link", "set", "--help"}, []string{"replab link set", "-lab"}},
		{[]string{"lab", "check", "--help"}, []string{"[--probes 20]", "-probes"}},
		{[]string{"lab", "status", "--help"}, []string{"replab lab status"}},
		{[]string{"validate", "--help"}, []string{"replab validate FILE"}},
		{[]string{"report", "--help"}, []string{"replab report DIR"}},
		{[]string{"compare", "--help"}, []string{"replab compare"}},
		{[]string{"exec", "--help"}, []string{"replab exec", "-lab"}},
	} {
		out, code := replab(t, "", tc.args...)
		if code != 0 || strings.Count(out, "Usage:") != 1 {
			t.Errorf("%v: exit %d, %d usages (want 1):\n%s", tc.args, code, strings.Count(out, "Usage:"), out)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: no %q in\n%s", tc.args, w, out)
			}
		}
	}
}

// TestEveryCommandsHelpPrintsItsUsageOnce runs --help for every command in
// commands() and every subcommand its usage names (replab lab up, …): each
// prints one usage, naming itself, and exits 0.
func TestEveryCommandsHelpPrintsItsUsageOnce(t *testing.T) {
	t.Parallel()
	var cmds [][]string
	for _, c := range commands() {
		cmds = append(cmds, []string{c.name})
		out, _ := replab(t, "", c.name, "--help")
		sub := regexp.MustCompile(`replab ` + c.name + ` ([a-z]+)\b`)
		seen := map[string]bool{}
		for _, m := range sub.FindAllStringSubmatch(out, -1) {
			if !seen[m[1]] {
				seen[m[1]] = true
				cmds = append(cmds, []string{c.name, m[1]})
			}
		}
	}
	if len(cmds) < len(commands())+4 {
		t.Fatalf("found only %v: the lab and link subcommands are missing", cmds)
	}
	for _, args := range cmds {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			out, code := replab(t, "", append(args, "--help")...)
			if n := strings.Count(out, "Usage:"); code != 0 || n != 1 {
				t.Errorf("exit %d, %d usages (want 1):\n%s", code, n, out)
			}
			if !strings.Contains(out, "replab "+strings.Join(args, " ")) {
				t.Errorf("the usage does not name %q:\n%s", strings.Join(args, " "), out)
			}
		})
	}
}

// TestValidateReportsEveryErrorAtOnce: a spec with errors of its own
// (a duration too short, think time with a rate), an engine error, a
// workload error and sweep points that are all invalid gets every error
// in one pass, each at its line, each point's quoting its swept value and
// repeating none of the spec's own.
func TestValidateReportsEveryErrorAtOnce(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "bad.toml")
	if err := os.WriteFile(path, []byte(`[lab]
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
[scheme]
comit = "on"
[workload]
kind = "personnel"
persons = 0
[run]
duration = "0.5s"
think = "1s"
rate = "100/s"
[sweep]
"run.users" = [0, -3]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code := replab(t, "", "validate", path)
	if code == 0 {
		t.Fatalf("exit 0: %s", out)
	}
	for _, want := range []string{
		"bad.toml:13: scheme.comit: unknown option for engine postgres",
		"bad.toml:16: workload.persons: want a whole number from 1",
		`bad.toml:18: run.duration = "0.5s": too short`,
		`bad.toml:19: run.think = "1s": think time is for closed loop`,
		"sweep point run.users=0:\n" + path + ":22: run.users = 0: want between 1 and 10000 users\n",
		"sweep point run.users=-3:\n" + path + ":22: run.users = -3: want between 1 and 10000 users",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "run.duration"); n != 1 {
		t.Errorf("the spec's own error is repeated %d times (want once):\n%s", n, out)
	}
}

// TestValidateSaysWhatIsVerified: with faults, validate promises the
// acknowledged-commit check only where the run does it (engines with SQL,
// and Berkeley DB JE's puts) and says plainly where it does not.
func TestValidateSaysWhatIsVerified(t *testing.T) {
	t.Parallel()
	bdb, err := os.ReadFile("../../scenarios/bdb-ha.toml")
	if err != nil {
		t.Fatal(err)
	}
	bdbFaults := filepath.Join(t.TempDir(), "bdb-faults.toml")
	text := string(bdb) + "\n\n[[fault]]\nat = \"5s\"\nnode = \"m1\"\ndo = \"pause\"\nfor = \"1s\"\n"
	if err := os.WriteFile(bdbFaults, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ file, want string }{
		{"../../examples/pg-faults.toml", "verify: every acknowledged commit is looked for at every node after the run\n"},
		{"../../examples/mariadb-galera-faults.toml", "verify: every acknowledged commit is looked for at every node after the run\n"},
		{bdbFaults, "verify: every acknowledged put is looked for at every node after the run\n"},
		{"../../examples/xrootd-faults.toml", "verify: acknowledged commits: does not apply to engine xrootd"},
	} {
		t.Run(filepath.Base(tc.file), func(t *testing.T) {
			out, code := replab(t, "", "validate", tc.file)
			if code != 0 || !strings.Contains(out, tc.want) || strings.Count(out, "verify:") != 1 {
				t.Errorf("exit %d: want one verify line %q in:\n%s", code, tc.want, out)
			}
		})
	}
}

// TestValidateWarnsOfSyncWithoutWaiting: PostgreSQL's durability = "nosync"
// with synchronous standbys runs, but no commit waits for them: validate
// accepts it and says so at its file:line, for the spec and for a sweep
// point that sets it.
func TestValidateWarnsOfSyncWithoutWaiting(t *testing.T) {
	t.Parallel()
	out, code := replab(t, "", "validate", "../../scenarios/bdb-ha-pg.toml")
	want := `warning: ../../scenarios/bdb-ha-pg.toml:93: scheme.durability = "nosync": with replication = "sync" no commit waits for a standby`
	if code != 0 || strings.Count(out, want) != 2 || !strings.Contains(out, `(sweep point scheme.durability="nosync", scheme.standbys="ANY 1 (r1, r2)")`) {
		t.Errorf("exit %d; want two warnings %q, one per sweep point with nosync, in:\n%s", code, want, out)
	}
	b, err := os.ReadFile("../../scenarios/bdb-ha-pg.toml")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "nosync.toml")
	text := strings.Replace(string(b), "\ndurability = \"sync\"\n", "\ndurability = \"nosync\"\n", 1)
	text = text[:strings.Index(text, "[sweep]")]
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code = replab(t, "", "validate", path)
	if code != 0 || strings.Count(out, "warning: ") != 1 || !strings.Contains(out, path+`:81: scheme.durability = "nosync": with replication = "sync" no commit waits`) {
		t.Errorf("exit %d; want one warning at line 81 in:\n%s", code, out)
	}
}

func TestPgQuorumExampleNodesHaveDSNsThatWorkFromEverySite(t *testing.T) {
	t.Parallel()
	testkit.Need(t, testkit.Lab, testkit.Postgres, testkit.Psql)
	state := t.TempDir()
	spec, _ := writeExample(t, "pg-quorum", "pgq")
	cmd := labUp(t, spec, state)
	out, code := replab(t, state, "lab", "status", "--json")
	if code != 0 {
		t.Fatalf("status: %s", out)
	}
	var st lab.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatal(err)
	}
	roles := map[string]string{}
	dsn := map[string]string{}
	for _, n := range st.Nodes {
		roles[n.Name] = n.Site + "/" + n.Role
		dsn[n.Name] = n.DSN
	}
	if roles["p1"] != "primary/primary" || roles["e1"] != "eu/standby" || roles["a1"] != "asia/standby" {
		t.Fatalf("nodes %+v", st.Nodes)
	}
	psql := func(site, node, sql string) string {
		t.Helper()
		out, code := replab(t, "", "exec", "--state", state, site, "--", "psql", dsn[node], "-Atc", sql)
		if code != 0 {
			t.Fatalf("psql from %s to %s: exit %d: %s", site, node, code, out)
		}
		return strings.TrimSpace(out)
	}
	psql("asia", "p1", "CREATE TABLE hello (id int PRIMARY KEY); INSERT INTO hello VALUES (42)")
	// remote_apply with ANY 1: at least one standby has it at once; both soon.
	for _, site := range []string{"primary", "eu", "asia"} {
		for _, node := range []string{"e1", "a1"} {
			var got string
			for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
				if got = psql(site, node, "SELECT coalesce(max(id), 0) FROM hello"); got == "42" || time.Now().After(deadline) {
					break
				}
			}
			if got != "42" {
				t.Errorf("from %s, %s has %q, want 42", site, node, got)
			}
		}
	}
	if got := psql("eu", "p1", "SHOW synchronous_standby_names"); got != "ANY 1 (e1, a1)" {
		t.Errorf("synchronous_standby_names = %q", got)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
}
