package storage_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"replab/internal/engine"
	"replab/internal/engine/postgres/pgtest"
	"replab/internal/lab"
	"replab/internal/monitor"
)

// The primary's files are on a san served from site store, the standby's
// on a nas served from there too: every WAL write and fsync of both
// crosses a link to store.
const pgOnStorage = `
[lab]
name = "NAME"
[site.db1]
[site.db2]
[site.store]
[[link]]
sites = ["db1", "store"]
[[link]]
sites = ["db2", "store"]
[[link]]
sites = ["db1", "db2"]
[storage.san]
kind = "san"
site = "store"
size = "256MiB"
[storage.nas]
kind = "nas"
site = "store"
[engine]
kind = "postgres"
[node.p1]
site = "db1"
role = "primary"
storage = "san"
[node.s1]
site = "db2"
role = "standby"
from = "p1"
storage = "nas"
`

// TestPostgresOnSANAndNAS: a primary on a san and its standby on a nas
// start, commit and replicate; the storage's bytes cross the links to
// the storage site; after Close nothing of the storage remains.
func TestPostgresOnSANAndNAS(t *testing.T) {
	l, c := pgtest.Up(t, "stor", pgOnStorage)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	data, err := l.DataDir()
	if err != nil {
		t.Fatal(err)
	}
	for node, fs := range map[string]string{"p1": "ext4", "s1": "fuse.sshfs"} {
		dir, err := l.NodeDataDir(node)
		if err != nil {
			t.Fatal(err)
		}
		if got := fsType(t, dir); got != fs {
			t.Errorf("node %s: files on %s (%s), want %s", node, dir, got, fs)
		}
		if _, err := os.Stat(dir + "/pg-" + node + "/PG_VERSION"); err != nil {
			t.Errorf("node %s: no PostgreSQL cluster on its storage: %v", node, err)
		}
	}
	roles := map[string]int{}
	for _, p := range l.StorageProcesses() {
		roles[p.Node+" "+p.Name+" in "+p.Site]++
	}
	for _, want := range []string{"p1 nbdkit in store", "p1 nbdfuse in db1", "s1 sshfs in db2", "s1 sftp-server in store"} {
		if roles[want] != 1 {
			t.Errorf("storage processes %v: want one %s", roles, want)
		}
	}

	mon, err := monitor.Start(ctx, monitor.Config{Lab: l, Cluster: c, Interval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	measureFrom := time.Now()
	before := storeBytes(l)
	nodes := c.Nodes()
	p1 := connect(t, ctx, l, nodes[0], "db1")
	const rows = 100
	if _, err := p1.Exec(ctx, "CREATE TABLE t (id int PRIMARY KEY, v text)"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i := range rows { // one synchronous commit each: a WAL fsync on the san
		if _, err := p1.Exec(ctx, "INSERT INTO t VALUES ($1, repeat('x', 500))", i); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d commits on the san: %.2f ms each", rows, float64(time.Since(start).Microseconds())/1000/rows)
	if _, err := p1.Exec(ctx, "CHECKPOINT"); err != nil {
		t.Fatal(err)
	}
	s1 := connect(t, ctx, l, nodes[1], "db2")
	for {
		var n int
		if err := s1.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err == nil && n == rows {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the standby on the nas never showed %d rows", rows)
		case <-time.After(50 * time.Millisecond):
		}
	}
	if _, err := s1.Exec(ctx, "CHECKPOINT"); err != nil { // a restartpoint: fsyncs on the nas
		t.Fatal(err)
	}
	after := storeBytes(l)
	for _, dir := range []string{"db1->store", "db2->store"} {
		t.Logf("%s: %d bytes while writing", dir, after[dir]-before[dir])
		if after[dir]-before[dir] < rows*500 {
			t.Errorf("%s carried %d bytes while %d rows were written and replicated: the storage's traffic does not cross it", dir, after[dir]-before[dir], rows)
		}
	}
	p1.Close(ctx)
	s1.Close(ctx)
	mon.MarkMeasure(measureFrom, time.Now())
	sum, err := mon.Stop()
	if err != nil {
		t.Fatal(err)
	}
	for _, nr := range [][2]string{{"p1", "nbdkit"}, {"p1", "nbdfuse"}, {"s1", "sshfs"}, {"s1", "sftp-server"}} {
		rs, ok := sum.Roles[nr[0]+monitor.StorageNodeSuffix][nr[1]]
		t.Logf("%s%s %s: %.3f CPU s", nr[0], monitor.StorageNodeSuffix, nr[1], rs.CPUS)
		if !ok || rs.CPUS <= 0 {
			t.Errorf("the monitor measured no CPU of %s's %s (roles %v)", nr[0], nr[1], sum.Roles)
		}
	}

	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	assertNothingLeft(t, data)
}

func connect(t *testing.T, ctx context.Context, l *lab.Lab, n engine.Node, site string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.ConnectConfig(ctx, pgtest.ConnConfig(t, l, n, site))
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// storeBytes is the bytes delivered by every direction into site store.
func storeBytes(l *lab.Lab) map[string]uint64 {
	out := map[string]uint64{}
	for _, d := range l.Emulator().Stats() {
		out[d.From+"->"+d.To] = d.Counters.DeliveredBytes
	}
	return out
}

// fsType is the type of the file system mounted at dir.
func fsType(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		for i, x := range f {
			if x == "-" && len(f) > i+1 && f[4] == dir {
				return f[i+1]
			}
		}
	}
	return "(not a mount point)"
}

// assertNothingLeft: no mount, loop device or storage process refers to
// the lab's data directory.
func assertNothingLeft(t *testing.T, data string) {
	t.Helper()
	b, _ := os.ReadFile("/proc/mounts")
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, data) {
			t.Errorf("still mounted: %s", line)
		}
	}
	out, _ := exec.Command("losetup", "-l", "-n", "-O", "NAME,BACK-FILE").Output()
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, data) {
			t.Errorf("loop device still attached: %s", line)
		}
	}
	out, _ = exec.Command("ps", "-eo", "pid,args").Output()
	for _, line := range strings.Split(string(out), "\n") {
		for _, name := range []string{"nbdkit", "nbdfuse", "sshfs", "sftp-server"} {
			if strings.Contains(line, name) && strings.Contains(line, data) {
				t.Errorf("storage process left: %s", strings.TrimSpace(line))
			}
		}
	}
	if _, err := os.Stat(data); err == nil {
		t.Errorf("data directory %s left", data)
	}
}
