package main

import (
	"strings"
	"testing"
)

// TestAgentFindsItsEngineInTheRegistry: replab agent opens its replica
// through the engine's side of target mode, found by --engine in the
// registry; an engine that cannot attach, or a connection string it
// cannot read, is refused before the agent listens.
func TestAgentFindsItsEngineInTheRegistry(t *testing.T) {
	for _, tc := range []struct {
		name, engine, dsn, want string
	}{
		{"unknown engine", "oracle", "host=x", `unknown engine "oracle": mariadb or postgres`},
		{"an engine that cannot attach", "xrootd", "host=x", `unknown engine "xrootd": mariadb or postgres`},
		{"not a libpq string", "postgres", "host=x port=notaport", "--dsn is not a PostgreSQL connection string: "},
		{"not a MariaDB string", "mariadb", "nonsense", "--dsn is not a MariaDB connection string (user@tcp(host:3306)/db): "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := replicaOpener(tc.engine, tc.dsn); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("got %v, want %q…", err, tc.want)
			}
		})
	}
	for _, tc := range []struct{ engine, dsn string }{
		{"postgres", "host=127.0.0.1 port=1 user=replab dbname=app"},
		{"mariadb", "replab@tcp(127.0.0.1:1)/app"},
	} {
		if open, err := replicaOpener(tc.engine, tc.dsn); err != nil || open == nil {
			t.Errorf("%s %q: %v", tc.engine, tc.dsn, err)
		}
	}
}
