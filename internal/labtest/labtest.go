// Package labtest brings up labs and PostgreSQL clusters for integration
// tests: it skips a test when the machine cannot run it, gives each lab a
// unique name and private state and data roots, and removes everything
// when the test ends. It is a normal package so that tests in several
// packages can share it, but only tests import it.
//
// Tests in replab/internal/engine/postgres cannot use it: it imports that
// package.
package labtest

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"replab/internal/engine"
	"replab/internal/engine/postgres"
	"replab/internal/lab"
	"replab/internal/spec"
)

// upTimeout bounds bringing up a lab and its cluster.
const upTimeout = 3 * time.Minute

// RequireLab skips the test with -short, or when the machine cannot build
// labs (root, ip, /dev/net/tun), saying what is missing.
func RequireLab(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test (namespaces): skipped with -short")
	}
	if err := lab.Preflight(); err != nil {
		t.Skip("integration test skipped: " + err.Error())
	}
}

// RequirePostgres is RequireLab, and skips the test too when no PostgreSQL
// server is installed where the postgres engine looks for one.
func RequirePostgres(t testing.TB) {
	t.Helper()
	RequireLab(t)
	if m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres"); len(m) == 0 {
		t.Skip("integration test skipped: PostgreSQL is not installed (apt-get install postgresql-15)")
	}
}

// RequirePglogical is RequirePostgres, and skips the test too when the
// pglogical extension (multi-master) is not installed for any server.
func RequirePglogical(t testing.TB) {
	t.Helper()
	RequirePostgres(t)
	if m, _ := filepath.Glob("/usr/share/postgresql/*/extension/pglogical.control"); len(m) == 0 {
		t.Skip("integration test skipped: pglogical is not installed (apt-get install postgresql-15-pglogical)")
	}
}

// UniqueName is a lab name no other test or test run uses at the same time:
// prefix-<pid mod 10000>-<3 random hex digits>. Lab names have at most 20
// characters, so prefix should have at most 10.
func UniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d-%03x", prefix, os.Getpid()%10000, rand.IntN(0x1000))
}

// Lab brings up the lab of spec text whose [lab] section says
// name = "NAME"; the lab is named UniqueName(prefix), keeps its state and
// data in the test's temporary directories, and is closed when the test
// ends. It calls RequireLab first.
func Lab(t testing.TB, prefix, specText string) *lab.Lab {
	t.Helper()
	RequireLab(t)
	return up(t, prefix, specText)
}

// Postgres is Lab with a PostgreSQL cluster on the lab's nodes (after
// RequirePostgres). The cluster is closed before the lab when the test
// ends. The engine's log goes to stderr with -v.
func Postgres(t testing.TB, prefix, specText string) (*lab.Lab, engine.Cluster) {
	t.Helper()
	RequirePostgres(t)
	l := up(t, prefix, specText)
	var log io.Writer = io.Discard
	if testing.Verbose() {
		log = os.Stderr
	}
	ctx, cancel := context.WithTimeout(context.Background(), upTimeout)
	defer cancel()
	c, err := postgres.Engine{}.Up(ctx, l, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return l, c
}

func up(t testing.TB, prefix, specText string) *lab.Lab {
	t.Helper()
	const placeholder = `name = "NAME"`
	if !strings.Contains(specText, placeholder) {
		t.Fatalf("labtest: spec text has no %s", placeholder)
	}
	text := strings.Replace(specText, placeholder, fmt.Sprintf("name = %q", UniqueName(prefix)), 1)
	s, err := spec.Parse(prefix+".toml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), upTimeout)
	defer cancel()
	l, err := lab.Up(ctx, s, lab.Options{StateRoot: t.TempDir(), DataRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("close lab: %v", err)
		}
	})
	return l
}

// ConnConfig is a pgx configuration for node whose connections start in
// site, so that they cross the lab's links as a client there would.
func ConnConfig(t testing.TB, l *lab.Lab, node engine.Node, site string) *pgx.ConnConfig {
	t.Helper()
	cfg, err := pgx.ParseConfig(node.DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DialFunc = l.Site(site).DialContext
	return cfg
}
