package enginekit

import "testing"

func TestFirstWordsShortensStatements(t *testing.T) {
	if got := FirstWords("ANALYZE\n  per,   org"); got != "ANALYZE per, org" {
		t.Errorf("got %q", got)
	}
	if got := FirstWords("CREATE TABLE replab_lag (writer int PRIMARY KEY, seq bigint NOT NULL)"); got != "CREATE TABLE replab_lag (writer" {
		t.Errorf("got %q", got)
	}
	long := "ANALYZE aaaaaaaaaaaaaaaaaaaa, bbbbbbbbbbbbbbbbbbbb, cccccccccccccccccccc, dddddddddd"
	if got := FirstWords(long); len(got) != 60 || got[57:] != "..." {
		t.Errorf("got %q", got)
	}
}
