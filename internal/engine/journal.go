package engine

import (
	"context"
	"database/sql"
	"fmt"
)

// The verification journal: every writing transaction of a run with
// verification on also inserts its key (writer, seq) into replab_journal,
// in the same transaction as its changes; after the run, the keys found at
// each node are compared with those whose COMMIT was acknowledged.

// JournalTableName is the verification journal's table.
const JournalTableName = "replab_journal"

// JournalTable is the journal's definition: replicated whole, everywhere.
func JournalTable() Table {
	return Table{
		Name:       JournalTableName,
		Everywhere: true,
		Create: map[string]string{
			"postgres": "CREATE TABLE " + JournalTableName + " (writer int NOT NULL, seq bigint NOT NULL, PRIMARY KEY (writer, seq))",
			"mysql":    "CREATE TABLE " + JournalTableName + " (writer INT NOT NULL, seq BIGINT NOT NULL, PRIMARY KEY (writer, seq)) ENGINE=InnoDB",
		},
	}
}

// JournalInsertSQL is the statement a journalled transaction runs, with
// the arguments (seq, writer).
func JournalInsertSQL(dialect string) (string, error) {
	switch dialect {
	case "postgres":
		return "INSERT INTO " + JournalTableName + " (seq, writer) VALUES ($1, $2)", nil
	case "mysql":
		return "INSERT INTO " + JournalTableName + " (seq, writer) VALUES (?, ?)", nil
	}
	return "", fmt.Errorf("the verification journal has no SQL for dialect %q (it knows postgres, mysql)", dialect)
}

// JournalKey is one journalled transaction.
type JournalKey struct {
	Writer int
	Seq    int64
}

// ReadJournal reads every key of the journal at a node through db.
func ReadJournal(ctx context.Context, db *sql.DB) (map[JournalKey]bool, error) {
	rows, err := db.QueryContext(ctx, "SELECT writer, seq FROM "+JournalTableName)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[JournalKey]bool{}
	for rows.Next() {
		var k JournalKey
		if err := rows.Scan(&k.Writer, &k.Seq); err != nil {
			return nil, err
		}
		out[k] = true
	}
	return out, rows.Err()
}
