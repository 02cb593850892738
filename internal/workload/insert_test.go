package workload

import "testing"

func TestInsertStatementUsesTheDialectsPlaceholders(t *testing.T) {
	for _, tc := range []struct {
		dialect string
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

func TestFirstWordsShortensStatements(t *testing.T) {
	if got := FirstWords("ANALYZE\n  per,   org"); got != "ANALYZE per, org" {
		t.Errorf("got %q", got)
	}
	long := "ANALYZE aaaaaaaaaa, bbbbbbbbbb, cccccccccc, dddddddddd, eeeeeeeeee, ffffffffff"
	if got := FirstWords(long); len(got) != 60 || got[57:] != "..." {
		t.Errorf("got %q", got)
	}
}
