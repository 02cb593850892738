package driver

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// pipelines reports whether the user's connection can send a whole
// transaction in one round trip (a pgx connection to PostgreSQL).
func (u *user) pipelines(ctx context.Context) bool {
	ok := false
	_ = u.conn.Raw(func(dc any) error {
		_, ok = dc.(*stdlib.Conn)
		return nil
	})
	return ok
}

// attemptBatch runs a transaction type that has a Batch as one pipeline:
// BEGIN, its statements, the lag probe's update and COMMIT leave in one
// write and their results come back together — one round trip where the
// statement-by-statement path needs one per statement, as a client that
// pipelines would. The COMMIT is sent with the rest, so the lag journal
// records it as sent just before the write.
func (u *user) attemptBatch(ctx context.Context, ti int, measured, track bool) (int64, string, error) {
	t := u.d.types[ti]
	calls := t.Batch(u.r)
	var seq int64
	j := u.j
	if !track {
		j = nil
	}
	if j != nil {
		seq = j.Next()
	}
	var rows int64
	committed := false
	err := u.conn.Raw(func(dc any) error {
		c := dc.(*stdlib.Conn).Conn()
		b := &pgx.Batch{}
		b.Queue("BEGIN")
		for _, cl := range calls {
			b.Queue(t.Statements[cl.Stmt], cl.Args...)
		}
		if j != nil {
			b.Queue(u.d.cfg.LagStatement, seq, u.id)
		}
		b.Queue("COMMIT")
		if j != nil {
			j.Sending(seq, u.d.cfg.Now(), measured)
		}
		br := c.SendBatch(ctx, b)
		var first error
		keep := func(err error) {
			if first == nil {
				first = err
			}
		}
		if _, err := br.Exec(); err != nil {
			keep(err)
		}
		for _, cl := range calls {
			tag, err := br.Exec()
			if err != nil {
				keep(err)
				continue
			}
			rows += tag.RowsAffected()
			if cl.Rows >= 0 && tag.RowsAffected() != cl.Rows {
				keep(fmt.Errorf("%s: %d rows changed, want %d", t.Name, tag.RowsAffected(), cl.Rows))
			}
		}
		if j != nil {
			if tag, err := br.Exec(); err != nil {
				keep(err)
			} else if tag.RowsAffected() != 1 {
				keep(fmt.Errorf("lag probe row of writer %d changed %d rows, want 1 (was the lag table seeded?)", u.id, tag.RowsAffected()))
			}
		}
		tag, err := br.Exec()
		switch {
		case err != nil:
			keep(err)
		case tag.String() == "COMMIT":
			committed = true
		default:
			// PostgreSQL answers ROLLBACK to a COMMIT of an aborted transaction.
			keep(errors.New("transaction rolled back"))
		}
		keep(br.Close())
		return first
	})
	if j != nil {
		j.Done(seq, committed)
	}
	if err != nil {
		return 0, errorKind(err), err
	}
	return rows, "", nil
}

// batchable reports whether transaction type ti can take the pipeline.
func (u *user) batchable(ti int) bool {
	return u.pipe && u.d.types[ti].Batch != nil
}
