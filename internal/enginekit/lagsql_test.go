package enginekit

import (
	"strings"
	"testing"

	"replab/internal/engine"
)

func TestLagStatements(t *testing.T) {
	seed, err := LagSeedSQL("postgres", 1001)
	if err != nil || len(seed) != 2 || !strings.HasPrefix(seed[0], "INSERT INTO replab_lag (writer, seq) VALUES (0, 0), (1, 0), ") ||
		seed[1] != "INSERT INTO replab_lag (writer, seq) VALUES (1000, 0) ON CONFLICT (writer) DO UPDATE SET seq = 0" {
		t.Errorf("seed %.100q…, %v", seed, err)
	}
	if s, _ := LagSeedSQL("mysql", 1000); len(s) != 1 || !strings.HasSuffix(s[0], "(999, 0) ON DUPLICATE KEY UPDATE seq = 0") {
		t.Errorf("mysql seed %d statements, ending %q", len(s), s[0][len(s[0])-60:])
	}
	my, _ := LagUpdateSQL("mysql")
	pg, _ := LagUpdateSQL("postgres")
	if my != "UPDATE replab_lag SET seq = ? WHERE writer = ?" || pg != "UPDATE replab_lag SET seq = $1 WHERE writer = $2" {
		t.Error(my, pg)
	}
	if tb := LagTable(); tb.Name != "replab_lag" || tb.Create[engine.Postgres] == "" || tb.Create[engine.MySQL] == "" || !tb.Everywhere {
		t.Errorf("table %+v", tb)
	}
	// An unknown dialect is an error, not a panic.
	if _, err := LagSeedSQL("oracle", 1); err == nil || !strings.Contains(err.Error(), `dialect "oracle"`) {
		t.Errorf("seed in oracle: %v", err)
	}
	if _, err := LagUpdateSQL("oracle"); err == nil {
		t.Error("update in oracle: no error")
	}
}
