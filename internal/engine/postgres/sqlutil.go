package postgres

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// pgMessage is a server error's message with its detail and hint.
func pgMessage(err error) string {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return err.Error()
	}
	msg := pe.Message
	if pe.Detail != "" {
		msg += ": " + strings.TrimSuffix(pe.Detail, ".")
	}
	if pe.Hint != "" {
		msg += " (" + strings.TrimSuffix(pe.Hint, ".") + ")"
	}
	return msg
}

// queryRowOn scans one row of a query on n into dst.
func queryRowOn(ctx context.Context, n *node, sql string, args []any, dst ...any) error {
	conn, err := n.connect(ctx, "")
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.QueryRow(ctx, sql, args...).Scan(dst...)
}

var plainName = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// sqlName writes a name as SQL: plain lower-case names as they are (as a
// workload's DDL writes them), others quoted.
func sqlName(name string) string {
	if plainName.MatchString(name) {
		return name
	}
	return pgx.Identifier{name}.Sanitize()
}

// sqlString writes a SQL string literal.
func sqlString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// lowerAll lower-cases names from a spec: unquoted SQL identifiers.
func lowerAll(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = strings.ToLower(n)
	}
	return out
}

// missingNames returns the names in want that have is lacks.
func missingNames(want, have []string) []string {
	var out []string
	for _, w := range want {
		if !slices.Contains(have, w) {
			out = append(out, w)
		}
	}
	return out
}
