package enginekit

import (
	"testing"

	"replab/internal/engine"
)

func TestInsertStatementUsesTheDialectsPlaceholders(t *testing.T) {
	for _, tc := range []struct {
		dialect engine.Dialect
		want    string
	}{
		{"postgres", "INSERT INTO kv (k, v) VALUES ($1, $2), ($3, $4)"},
		{"mysql", "INSERT INTO kv (k, v) VALUES (?, ?), (?, ?)"},
	} {
		l := &insertLoader{dialect: tc.dialect}
		if got := l.statement("kv", []string{"k", "v"}, 2); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.dialect, got, tc.want)
		}
	}
}
