// Package pgtest brings up PostgreSQL clusters for integration tests, on
// top of labtest: it skips a test when PostgreSQL (or pglogical) is not
// installed, saying what to install. Only tests import it.
package pgtest

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"replab/internal/engine"
	"replab/internal/engine/postgres"
	"replab/internal/lab"
	"replab/internal/labtest"
	"replab/internal/testkit"
)

// Require skips the test with -short, when the machine cannot build labs,
// or when no PostgreSQL server is installed where the engine looks.
func Require(t testing.TB) {
	t.Helper()
	testkit.Need(t, testkit.Lab, testkit.Postgres)
}

// RequirePglogical is Require, and skips the test too when the pglogical
// extension (multi-master) is not installed for any server.
func RequirePglogical(t testing.TB) {
	t.Helper()
	testkit.Need(t, testkit.Lab, testkit.Postgres, testkit.Pglogical)
}

// Up is labtest.Cluster with the postgres engine, after Require.
func Up(t testing.TB, prefix, specText string) (*lab.Lab, engine.Cluster) {
	t.Helper()
	Require(t)
	return labtest.Cluster(t, postgres.Engine{}, prefix, specText)
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
