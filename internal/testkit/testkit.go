// Package testkit is what replab's tests share to decide whether they can
// run here and with whom: Need skips a test whose machine lacks something
// (root, a database server, a JDK), saying what and how to install it, and
// Exclusive keeps a test that measures time alone on the machine while
// the other integration tests, in every package, run side by side. Only
// tests import it; it imports nothing of replab, so every package's tests
// can use it.
package testkit

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Req is one thing a test needs from the machine.
type Req struct {
	name string
	// short: the requirement is an integration test's, skipped with -short.
	short bool
	// lab: the test builds labs or runs servers: it holds the machine's
	// shared lock while it runs (see Exclusive).
	lab   bool
	check func() error
}

// The requirements. Each check says what is missing and how to get it.
var (
	// Root: the test runs as root (switching users, writing /run).
	Root = Req{name: "root", check: func() error {
		if os.Geteuid() != 0 {
			return errors.New("needs root")
		}
		return nil
	}}
	// Lab: an integration test that builds labs (network namespaces, TUN
	// devices) or runs servers: skipped with -short, needs root, ip and
	// /dev/net/tun (what lab.Preflight asks of replab itself).
	Lab = Req{name: "lab", short: true, lab: true, check: func() error {
		if os.Geteuid() != 0 {
			return errors.New("needs root to create network namespaces and TUN devices")
		}
		if _, err := exec.LookPath("ip"); err != nil {
			return errors.New("the ip command is missing (apt-get install iproute2)")
		}
		if _, err := os.Stat("/dev/net/tun"); err != nil {
			return errors.New("/dev/net/tun is missing (modprobe tun)")
		}
		return nil
	}}
	Postgres  = glob("PostgreSQL", "/usr/lib/postgresql/*/bin/postgres", "postgresql-15")
	Pglogical = glob("pglogical", "/usr/share/postgresql/*/extension/pglogical.control", "postgresql-15-pglogical")
	MariaDB   = files("MariaDB", "mariadb-server", "/usr/sbin/mariadbd", "/usr/bin/mariadb-install-db")
	Galera    = glob("Galera", "/usr/lib/galera/libgalera_*.so", "galera-4")
	Java      = commands("a JDK and Maven", "openjdk-17-jdk-headless maven", "java", "javac", "mvn")
	XRootD    = files("XRootD", "xrootd-server", "/usr/bin/xrootd")
	Fio       = commands("fio", "fio", "fio")
	Tcpdump   = commands("tcpdump", "tcpdump", "tcpdump")
	Pgbench   = glob("pgbench", "/usr/lib/postgresql/*/bin/pgbench", "postgresql-15")
	Psql      = commands("psql", "postgresql-client-15", "psql")
	// Storage: the SAN-like and NAS-like volumes' tools.
	Storage  = commands("the storage tools", "nbdkit libnbd-bin fuse3 e2fsprogs sshfs", "nbdkit", "nbdfuse", "sshfs", "losetup", "mkfs.ext4")
	Chromium = commands("chromium", "chromium", "chromium")
	// The HA managers and what they need (scripts/deps.sh ha).
	Patroni = files("Patroni", "patroni etcd-server python3-etcd", "/usr/bin/patroni", "/usr/bin/etcd")
	Repmgr  = glob("repmgr", "/usr/lib/postgresql/*/bin/repmgrd", "postgresql-15-repmgr")
	// PgAutoFailover: pg_autoctl and the monitor's extension.
	PgAutoFailover = Req{name: "pg_auto_failover", short: true, check: func() error {
		if _, err := os.Stat("/usr/bin/pg_autoctl"); err != nil {
			return errors.New("pg_auto_failover is not installed: /usr/bin/pg_autoctl is missing (scripts/deps.sh test, or apt-get install pg-auto-failover-cli postgresql-15-auto-failover)")
		}
		if m, _ := filepath.Glob("/usr/share/postgresql/*/extension/pgautofailover.control"); len(m) == 0 {
			return errors.New("pg_auto_failover's extension is not installed (scripts/deps.sh test, or apt-get install postgresql-15-auto-failover)")
		}
		return nil
	}}
	HAProxy = files("haproxy", "haproxy", "/usr/sbin/haproxy")
)

// Need skips t unless the machine has every requirement, with one line
// that says what is missing and how to install it ("scripts/deps.sh test"
// installs them all). A requirement marked lab makes t hold the machine's
// shared lock until it ends.
func Need(t testing.TB, reqs ...Req) {
	t.Helper()
	if skipUnless(t, reqs) {
		hold(t, shared)
	}
}

// skipUnless skips t unless the machine meets reqs; it says whether one
// of them is marked lab.
func skipUnless(t testing.TB, reqs []Req) (lab bool) {
	t.Helper()
	for _, r := range reqs {
		if r.short && testing.Short() {
			t.Skipf("integration test (%s): skipped with -short", r.name)
		}
		lab = lab || r.lab
	}
	for _, r := range reqs {
		if err := r.check(); err != nil {
			t.Skipf("integration test skipped: %v", err)
		}
	}
	return lab
}

func glob(what, pattern, pkg string) Req {
	return Req{name: what, short: true, check: func() error {
		if m, _ := filepath.Glob(pattern); len(m) == 0 {
			return fmt.Errorf("%s is not installed (scripts/deps.sh test, or apt-get install %s)", what, pkg)
		}
		return nil
	}}
}

func files(what, pkg string, paths ...string) Req {
	return Req{name: what, short: true, check: func() error {
		for _, p := range paths {
			if _, err := os.Stat(p); err != nil {
				return fmt.Errorf("%s is not installed: %s is missing (scripts/deps.sh test, or apt-get install %s)", what, p, pkg)
			}
		}
		return nil
	}}
}

func commands(what, pkgs string, cmds ...string) Req {
	return Req{name: what, short: true, check: func() error {
		var missing []string
		for _, c := range cmds {
			if _, err := exec.LookPath(c); err != nil {
				missing = append(missing, c)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("%s: %s missing (scripts/deps.sh test, or apt-get install %s)", what, strings.Join(missing, ", "), pkgs)
		}
		return nil
	}}
}
