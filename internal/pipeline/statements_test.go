package pipeline

import (
	"reflect"
	"testing"

	"replab/internal/pipeline/trail"
)

// TestStatements: the SQL a replicat sends for changes, statement by
// statement and batched: multi-row inserts and deletes for runs of one
// table and shape, updates one by one, found by the old key when the key
// changed, NULL as a nil parameter.
func TestStatements(t *testing.T) {
	ins, del, upd := insAcct, delAcct, updItem
	changes := []trail.Record{ins("1", "x"), ins("2", ""), upd, del("1"), del("2"), ins("3", "y")}
	b := func(ss ...string) [][]byte {
		out := make([][]byte, len(ss))
		for i, s := range ss {
			if s != "NULL" {
				out[i] = []byte(s)
			}
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		batch bool
		want  []stmt
	}{
		{"one by one", false, []stmt{
			{`INSERT INTO "public"."acct" ("id", "note") VALUES ($1, $2)`, b("1", "x")},
			{`INSERT INTO "public"."acct" ("id", "note") VALUES ($1, $2)`, b("2", "NULL")},
			{`UPDATE "public"."item" SET "a" = $1, "b" = $2, "v" = $3 WHERE "a" = $4 AND "b" = $5`, b("1", "k-new", "7", "1", "k")},
			{`DELETE FROM "public"."acct" WHERE "id" = $1`, b("1")},
			{`DELETE FROM "public"."acct" WHERE "id" = $1`, b("2")},
			{`INSERT INTO "public"."acct" ("id", "note") VALUES ($1, $2)`, b("3", "y")},
		}},
		{"batched", true, []stmt{
			{`INSERT INTO "public"."acct" ("id", "note") VALUES ($1, $2), ($3, $4)`, b("1", "x", "2", "NULL")},
			{`UPDATE "public"."item" SET "a" = $1, "b" = $2, "v" = $3 WHERE "a" = $4 AND "b" = $5`, b("1", "k-new", "7", "1", "k")},
			{`DELETE FROM "public"."acct" WHERE ("id") IN (($1), ($2))`, b("1", "2")},
			{`INSERT INTO "public"."acct" ("id", "note") VALUES ($1, $2)`, b("3", "y")},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := statements(changes, tc.batch)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
	// A run longer than maxRows is cut into statements of maxRows.
	var many []trail.Record
	for i := 0; i < maxRows+1; i++ {
		many = append(many, ins("1", "x"))
	}
	if got := statements(many, true); len(got) != 2 || len(got[0].args) != 2*maxRows || len(got[1].args) != 2 {
		t.Errorf("%d inserts batched into %d statements, want %d rows and 1", maxRows+1, len(got), maxRows)
	}
}

// Records both dialects' statement tests build on: an insert into acct
// (an empty note is NULL), a delete from it, and an update of item that
// changes its composite key.
func insAcct(id, note string) trail.Record {
	return trail.Record{Op: trail.OpInsert, Schema: "public", Table: "acct", Columns: []string{"id", "note"}, Key: []int{0},
		Values: []trail.Value{{Text: id}, {Text: note, Null: note == ""}}}
}

func delAcct(id string) trail.Record {
	return trail.Record{Op: trail.OpDelete, Schema: "public", Table: "acct", Columns: []string{"id"}, Key: []int{0}, Values: []trail.Value{{Text: id}}}
}

var updItem = trail.Record{Op: trail.OpUpdate, Schema: "public", Table: "item", Columns: []string{"a", "b", "v"}, Key: []int{0, 1},
	Values: []trail.Value{{Text: "1"}, {Text: "k-new"}, {Text: "7"}}, Old: []trail.Value{{Text: "1"}, {Text: "k"}}}
