package mariadb

import (
	"context"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"replab/internal/engine"
	"replab/internal/labtest"
	"replab/internal/spec"
)

const pairSpec = `
[lab]
name = "NAME"
[site.a]
[site.b]
[[link]]
sites = ["a", "b"]
delay = "5ms"
[engine]
kind = "mariadb"
[node.p]
site = "a"
role = "primary"
[node.r]
site = "b"
role = "replica"
from = "p"
[scheme]
durability = "write-nosync"
`

// TestNodeControl: a killed replica starts again and catches up from its
// GTID position; a restarted primary is found again by its replica.
func TestNodeControl(t *testing.T) {
	t.Parallel()
	_, c := testCluster(t, "mdbctl", pairSpec)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.ApplySchema(ctx, engine.Schema{Tables: []engine.Table{{Name: "t",
		Create: map[engine.Dialect]string{"mysql": "CREATE TABLE t (id BIGINT AUTO_INCREMENT PRIMARY KEY, v BIGINT)"}}}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Kill(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	if ps, _ := c.Processes(ctx); len(ps) == 0 || ps[len(ps)-1].Node == "r" {
		t.Errorf("threads of a killed node listed: %v", ps)
	}
	for i := range 20 {
		execAt(t, ctx, c, "p", "INSERT INTO t (v) VALUES (?)", i)
	}
	if err := c.Start(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitFlowing(ctx); err != nil {
		t.Fatal(err)
	}
	agree(t, ctx, c, "t")
	if err := c.Restart(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	execAt(t, ctx, c, "p", "INSERT INTO t (v) VALUES (99)")
	if err := c.WaitFlowing(ctx); err != nil {
		t.Fatal(err)
	}
	agree(t, ctx, c, "t")
	if err := c.Start(ctx, "p"); err == nil {
		t.Error("starting a running node: no error")
	}

	// Paused, the replica falls behind; resumed, it catches up.
	if err := c.Pause(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	execAt(t, ctx, c, "p", "INSERT INTO t (v) VALUES (100)")
	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	err := c.WaitFlowing(wctx)
	cancel()
	if err == nil {
		t.Error("a paused replica received a change")
	}
	if err := c.Resume(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitFlowing(ctx); err != nil {
		t.Fatalf("after resume: %v", err)
	}
	agree(t, ctx, c, "t")
}

// TestUpFailsCleanly: a setting the server refuses fails Up with the
// server's own words, and no server of the cluster is left running.
func TestUpFailsCleanly(t *testing.T) {
	t.Parallel()
	requireMariaDB(t)
	l := labtest.Lab(t, "mdbfail", strings.Replace(pairSpec, `[scheme]`, "[node.r.settings]\nno_such_variable = \"1\"\n[scheme]", 1))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := Engine{}.Up(ctx, l, io.Discard)
	if err == nil {
		t.Fatal("Up with an unknown server variable: no error")
	}
	t.Logf("Up: %v", err)
	if !strings.Contains(err.Error(), "node r") || !strings.Contains(err.Error(), "no_such_variable") {
		t.Errorf("error names neither the node nor the variable: %v", err)
	}
	data, _ := l.DataDir()
	out, _ := exec.Command("ps", "-eo", "pid,args").Output()
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, data) {
			t.Errorf("left running after a failed Up: %s", strings.TrimSpace(line))
		}
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want engine.ErrorClass
	}{
		{&mysql.MySQLError{Number: 1213, Message: "Deadlock found"}, engine.ErrorClass{Code: "1213", Retry: true, Conflict: true}},
		{&mysql.MySQLError{Number: 1205}, engine.ErrorClass{Code: "1205", Retry: true}},
		{&mysql.MySQLError{Number: 1047, Message: "WSREP has not yet prepared node for application use"}, engine.ErrorClass{Code: "1047", Unavailable: true}},
		{&mysql.MySQLError{Number: 1062}, engine.ErrorClass{Code: "1062"}},
		{mysql.ErrInvalidConn, engine.ErrorClass{Code: "connection"}},
		{errors.New("something"), engine.ErrorClass{}},
	} {
		wrapped := errors.Join(errors.New("tx"), tc.err)
		if got := classify(wrapped); got != tc.want {
			t.Errorf("%v: got %+v, want %+v", tc.err, got, tc.want)
		}
	}
	if got := engine.Classify(&cluster{}, errors.New("x")); got.Code != "other" {
		t.Errorf("an unknown error: %+v", got)
	}
}

func TestGTIDBehind(t *testing.T) {
	for _, tc := range []struct {
		ahead, behind string
		want          int64
	}{
		{"0-1-58", "0-1-58", 0},
		{"0-1-60", "0-1-58", 2},
		{"1-1-12,2-2-8", "1-1-10,2-2-3", 7},
		{"1-1-12", "", 12},
		{"", "0-1-5", 0},
	} {
		if got := GTIDBehind(tc.ahead, tc.behind); got != tc.want {
			t.Errorf("GTIDBehind(%q, %q) = %d, want %d", tc.ahead, tc.behind, got, tc.want)
		}
	}
}

func TestInitialCopyBytes(t *testing.T) {
	s, err := spec.Parse("g.toml", []byte(strings.Replace(galeraSpec, "NAME", "g", 1)))
	if err != nil {
		t.Fatal(err)
	}
	for node, want := range map[string]int64{"g1": 0, "g2": galeraSSTBytes, "g3": galeraSSTBytes} {
		if got := (Engine{}).InitialCopyBytes(s, node); got != want {
			t.Errorf("%s: %d, want %d", node, got, want)
		}
	}
	if s, err = spec.Parse("a.toml", []byte(strings.Replace(asyncSpec, "NAME", "a", 1))); err != nil {
		t.Fatal(err)
	}
	if got := (Engine{}).InitialCopyBytes(s, "r1"); got != 0 {
		t.Errorf("async replica: %d, want 0", got)
	}
}
