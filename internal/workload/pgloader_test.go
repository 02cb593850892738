package workload

import (
	"reflect"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestPgIdentifierSplitsTheSchema(t *testing.T) {
	for _, tc := range []struct {
		table string
		want  pgx.Identifier
		sql   string
	}{
		{"per", pgx.Identifier{"per"}, `"per"`},
		{"hr.per", pgx.Identifier{"hr", "per"}, `"hr"."per"`},
	} {
		got := pgIdentifier(tc.table)
		if !reflect.DeepEqual(got, tc.want) || got.Sanitize() != tc.sql {
			t.Errorf("pgIdentifier(%q) = %v (%s), want %v (%s)", tc.table, got, got.Sanitize(), tc.want, tc.sql)
		}
	}
}

func TestFirstWordsShortensStatements(t *testing.T) {
	if got := firstWords("ANALYZE\n  per,   org"); got != "ANALYZE per, org" {
		t.Errorf("got %q", got)
	}
	long := "ANALYZE aaaaaaaaaa, bbbbbbbbbb, cccccccccc, dddddddddd, eeeeeeeeee, ffffffffff"
	if got := firstWords(long); len(got) != 60 || got[57:] != "..." {
		t.Errorf("got %q", got)
	}
}
