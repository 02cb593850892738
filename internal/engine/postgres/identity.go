package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"replab/internal/spec"

	"github.com/jackc/pgx/v5"
)

// tablePlan is one table as logical replication sees it.
type tablePlan struct {
	name     string
	cols     []tableColumn // in attnum order
	pk       []string
	feeds    []feed // the replicas that receive it
	identity string // "default", "full" or "index replab_ri_<table> (a, b)"
	index    []string
}

type tableColumn struct {
	name    string
	notNull bool
	pk      bool
}

// feed is one replica's share of a table.
type feed struct {
	r     *node
	f     *spec.TableFilter // nil: the whole table
	field string            // the filter's spec field, for errors
	where []string          // columns the row filter reads
}

func (tp *tablePlan) feedOf(r *node) *feed {
	for i := range tp.feeds {
		if tp.feeds[i].r == r {
			return &tp.feeds[i]
		}
	}
	return nil
}

func (tp *tablePlan) filtered() bool {
	for _, fd := range tp.feeds {
		if fd.f != nil && (fd.f.Where != "" || len(fd.f.Columns) > 0) {
			return true
		}
	}
	return false
}

// planTable reads a new table's columns at the primary, finds the
// replicas receiving it and the columns their row filters read, and
// chooses its replica identity (see applySchemaLogical).
func (c *cluster) planTable(ctx context.Context, p *node, replicas []*node, name string, everywhere bool) (*tablePlan, []error) {
	tp := &tablePlan{name: name, identity: "default"}
	conn, err := p.connect(ctx, "")
	if err != nil {
		return tp, []error{err}
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT a.attname, a.attnotnull, coalesce(a.attnum = ANY(i.indkey), false)
		FROM pg_attribute a LEFT JOIN pg_index i ON i.indrelid = a.attrelid AND i.indisprimary
		WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`, sqlName(name))
	if err != nil {
		return tp, []error{fmt.Errorf("node %s: read the columns of %s: %w", p.Name, name, err)}
	}
	for rows.Next() {
		var col tableColumn
		if err := rows.Scan(&col.name, &col.notNull, &col.pk); err != nil {
			rows.Close()
			return tp, []error{err}
		}
		tp.cols = append(tp.cols, col)
		if col.pk {
			tp.pk = append(tp.pk, col.name)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return tp, []error{err}
	}

	var errs []error
	sp := c.lab.Spec
	for _, r := range replicas {
		fd := feed{r: r}
		if len(r.Tables) > 0 && !everywhere {
			i := slices.IndexFunc(r.Tables, func(f spec.TableFilter) bool { return strings.EqualFold(f.Table, name) })
			if i < 0 {
				continue // a partial replica without this table
			}
			fd.f = &r.Tables[i]
			fd.field = fmt.Sprintf("node.%s.table[%d]", r.Name, i+1)
		}
		if fd.f != nil {
			for _, col := range lowerAll(fd.f.Columns) {
				if !slices.ContainsFunc(tp.cols, func(c tableColumn) bool { return c.name == col }) {
					errs = append(errs, sp.Errorf(fd.field+".columns", "table %s has no column %s; its columns: %s", name, col, strings.Join(tp.colNames(), ", ")))
				}
			}
			if fd.f.Where != "" {
				fd.where, err = whereColumns(ctx, conn, name, fd.f.Where)
				if err != nil {
					errs = append(errs, sp.Errorf(fd.field+".where", "table %s: where = %q: %v", name, fd.f.Where, err))
				}
			}
		}
		tp.feeds = append(tp.feeds, fd)
	}
	if len(tp.feeds) == 0 || len(errs) > 0 {
		return tp, errs
	}
	if len(tp.pk) == 0 {
		return tp, []error{fmt.Errorf("table %s has no primary key: logical replication matches rows by it", name)}
	}

	// Column lists must cover the primary key.
	var listed []feed
	for _, fd := range tp.feeds {
		if fd.f == nil || len(fd.f.Columns) == 0 {
			continue
		}
		listed = append(listed, fd)
		if miss := missingNames(tp.pk, lowerAll(fd.f.Columns)); len(miss) > 0 {
			errs = append(errs, sp.Errorf(fd.field+".columns", "table %s: the column list must include the primary key (%s): PostgreSQL 15 refuses UPDATE and DELETE at the primary when a column list does not cover the replica identity; add %s",
				name, strings.Join(tp.pk, ", "), strings.Join(miss, ", ")))
		}
	}
	// Row filters on columns outside the primary key widen the identity.
	var extra []string
	for _, col := range tp.cols {
		if col.pk {
			continue
		}
		for _, fd := range tp.feeds {
			if slices.Contains(fd.where, col.name) && !slices.Contains(extra, col.name) {
				extra = append(extra, col.name)
			}
		}
	}
	switch {
	case len(extra) == 0:
	case len(listed) == 0:
		tp.identity = "full"
	default:
		tp.index = append(slices.Clone(tp.pk), extra...)
		tp.identity = fmt.Sprintf("index replab_ri_%s (%s)", name, strings.Join(tp.index, ", "))
		var lists []string
		for _, fd := range listed {
			lists = append(lists, fd.r.Name)
		}
		for _, col := range tp.cols {
			if !slices.Contains(extra, col.name) || col.notNull {
				continue
			}
			for _, fd := range tp.feeds {
				if slices.Contains(fd.where, col.name) {
					errs = append(errs, sp.Errorf(fd.field+".where", "table %s: the row filter reads %s, which is not in the primary key, and %s has a column list on %s: PostgreSQL 15 allows no column list with REPLICA IDENTITY FULL, and a replica identity index over (%s) needs %s NOT NULL; declare it NOT NULL, filter on primary key columns, or drop the column list",
						name, col.name, strings.Join(lists, ", "), name, strings.Join(tp.index, ", "), col.name))
				}
			}
		}
		for _, fd := range listed {
			if miss := missingNames(extra, lowerAll(fd.f.Columns)); len(miss) > 0 {
				errs = append(errs, sp.Errorf(fd.field+".columns", "table %s: the column list must include %s: the row filters on %s read it, so it joins the replica identity (%s), and PostgreSQL 15 refuses UPDATE and DELETE when a column list does not cover the replica identity",
					name, strings.Join(miss, ", "), name, tp.identity))
			}
		}
	}
	return tp, errs
}

func (tp *tablePlan) colNames() []string {
	var out []string
	for _, c := range tp.cols {
		out = append(out, c.name)
	}
	return out
}

// setIdentity sets the chosen replica identity at the primary.
func (tp *tablePlan) setIdentity(ctx context.Context, p *node) error {
	t := sqlName(tp.name)
	switch {
	case tp.identity == "full":
		return p.exec(ctx, "", "ALTER TABLE "+t+" REPLICA IDENTITY FULL")
	case len(tp.index) > 0:
		ix := sqlName("replab_ri_" + tp.name)
		var cols []string
		for _, col := range tp.index {
			cols = append(cols, sqlName(col))
		}
		if err := p.exec(ctx, "", fmt.Sprintf("CREATE UNIQUE INDEX %s ON %s (%s)", ix, t, strings.Join(cols, ", "))); err != nil {
			return err
		}
		return p.exec(ctx, "", fmt.Sprintf("ALTER TABLE %s REPLICA IDENTITY USING INDEX %s", t, ix))
	}
	return nil
}

// check asks the primary whether UPDATE and DELETE on the table still
// work under its publications (PostgreSQL checks when a statement starts,
// even one touching no row).
func (tp *tablePlan) check(ctx context.Context, p *node) error {
	if len(tp.feeds) == 0 || len(tp.pk) == 0 {
		return nil
	}
	conn, err := p.connect(ctx, "")
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.Background())
	t, k := sqlName(tp.name), sqlName(tp.pk[0])
	for _, q := range []string{"UPDATE " + t + " SET " + k + " = " + k + " WHERE false", "DELETE FROM " + t + " WHERE false"} {
		if _, err := tx.Exec(ctx, q); err != nil {
			return fmt.Errorf("node %s: table %s is published but %s fails: %s", p.Name, tp.name, strings.Fields(q)[0], pgMessage(err))
		}
	}
	return nil
}

// whereColumns returns the columns a row filter reads, as PostgreSQL
// parses it: a throw-away publication records a dependency on each.
func whereColumns(ctx context.Context, conn *pgx.Conn, table, where string) ([]string, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, fmt.Sprintf("CREATE PUBLICATION replab_probe FOR TABLE %s WHERE (%s)", sqlName(table), where)); err != nil {
		return nil, errors.New(pgMessage(err))
	}
	rows, err := tx.Query(ctx, `SELECT DISTINCT a.attname FROM pg_publication p
		JOIN pg_publication_rel r ON r.prpubid = p.oid
		JOIN pg_depend d ON d.classid = 'pg_publication_rel'::regclass AND d.objid = r.oid
			AND d.refclassid = 'pg_class'::regclass AND d.refobjid = r.prrelid AND d.refobjsubid > 0
		JOIN pg_attribute a ON a.attrelid = r.prrelid AND a.attnum = d.refobjsubid
		WHERE p.pubname = 'replab_probe'`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
