package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"replab/internal/enginekit"

	"github.com/jackc/pgx/v5/pgconn"
)

// waitSynced waits until every table of r's subscription has its initial
// copy done ('r' ready or 's' sync done) and the apply worker runs. While
// it waits, every 10 s it logs the bytes copied (the tables done, at their
// size at the primary, and what the running copies have read), the rate
// and the time left.
func (c *cluster) waitSynced(ctx context.Context, p, r *node) error {
	sub := subName(r)
	rc, err := r.connect(ctx, "")
	if err != nil {
		return err
	}
	defer rc.Close(context.Background())
	sizes := map[string]int64{} // table -> bytes at the primary
	var total int64
	if pc, err := p.connect(ctx, ""); err == nil {
		rows, err := pc.Query(ctx, `SELECT pt.schemaname || '.' || pt.tablename, pg_table_size(format('%I.%I', pt.schemaname, pt.tablename)::regclass)
			FROM pg_publication_tables pt WHERE pt.pubname = $1`, sub)
		if err == nil {
			for rows.Next() {
				var name string
				var size int64
				if rows.Scan(&name, &size) == nil {
					sizes[name] = size
					total += size
				}
			}
			rows.Close()
		}
		pc.Close(context.Background())
	}
	start := time.Now()
	_, err = c.waitFor(ctx, func(ctx context.Context) (bool, string, error) {
		var pending, workers, copying int64
		var states string
		var ready []string
		err := rc.QueryRow(ctx, `SELECT count(*) FILTER (WHERE sr.srsubstate NOT IN ('r', 's')),
			coalesce(string_agg(sr.srrelid::regclass::text || '=' || sr.srsubstate::text, ' ' ORDER BY sr.srrelid), ''),
			coalesce(array_agg(n.nspname || '.' || cl.relname) FILTER (WHERE sr.srsubstate IN ('r', 's')), '{}'),
			(SELECT count(*) FROM pg_stat_subscription st WHERE st.subname = $1 AND st.pid IS NOT NULL AND st.relid IS NULL),
			(SELECT coalesce(sum(bytes_processed), 0) FROM pg_stat_progress_copy)::bigint
			FROM pg_subscription_rel sr JOIN pg_subscription s ON s.oid = sr.srsubid
			JOIN pg_class cl ON cl.oid = sr.srrelid JOIN pg_namespace n ON n.oid = cl.relnamespace
			WHERE s.subname = $1`, sub).Scan(&pending, &states, &ready, &workers, &copying)
		if err != nil {
			return false, "", err
		}
		done := copying
		for _, t := range ready {
			done += sizes[t]
		}
		state := fmt.Sprintf("table states %s, apply worker running %t", states, workers == 1)
		if total > 0 {
			state += "; " + copyRate(done, total, time.Since(start))
		}
		return pending == 0 && workers == 1, state, nil
	})
	if err != nil {
		return fmt.Errorf("node %s: initial copy from %s: %w%s", r.Name, p.Name, err, c.subscriptionTrouble(r))
	}
	return nil
}

// copyRate says how far a copy of total bytes is after el: bytes, rate and
// time left (the rate is the average so far).
func copyRate(done, total int64, el time.Duration) string {
	line := fmt.Sprintf("about %.1f of %.1f MB copied", float64(done)/1e6, float64(total)/1e6)
	rate := float64(done) / max(el.Seconds(), 1e-9)
	if rate <= 0 {
		return line + ", waiting for data"
	}
	line += fmt.Sprintf(", %.2f MB/s", rate/1e6)
	if done < total {
		line += fmt.Sprintf(", about %s left", time.Duration(float64(total-done)/rate*float64(time.Second)).Round(time.Second))
	}
	return line
}

// waitFor polls check until it reports done (see enginekit.Poll): it gives
// up when ctx ends, on a permanent server error, or when the state check
// describes has not changed for c.flowTimeout(); every 10 s without an end
// it logs the state.
func (c *cluster) waitFor(ctx context.Context, check func(context.Context) (bool, string, error)) (string, error) {
	return enginekit.Poll{Stall: c.flowTimeout(), Permanent: permanent, Log: func(state string) {
		c.logf("  … still waiting: %s\n", state)
	}}.Until(ctx, check)
}

// permanent reports whether a query error will not go away by asking
// again: the server refused the statement itself, rather than the
// connection failing or the server shutting down.
func permanent(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || len(pe.Code) < 2 {
		return false
	}
	switch pe.Code[:2] {
	case "08", "53", "57", "58": // connection, resources, shutdown, system
		return false
	}
	return true
}

// subscriptionTrouble describes why a subscription may not be moving: its
// workers, error counts and the replica's log.
func (c *cluster) subscriptionTrouble(r *node) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var workers, applyErrs, syncErrs int64
	var enabled bool
	err := queryRowOn(ctx, r, `SELECT s.subenabled,
		(SELECT count(*) FROM pg_stat_subscription st WHERE st.subname = s.subname AND st.pid IS NOT NULL),
		coalesce(ss.apply_error_count, 0), coalesce(ss.sync_error_count, 0)
		FROM pg_subscription s LEFT JOIN pg_stat_subscription_stats ss ON ss.subid = s.oid
		WHERE s.subname = $1`, []any{subName(r)}, &enabled, &workers, &applyErrs, &syncErrs)
	if err != nil {
		return "; log: " + r.logTail()
	}
	return fmt.Sprintf("; subscription enabled %t, %d workers, %d apply and %d copy errors; log %s: %s",
		enabled, workers, applyErrs, syncErrs, r.logPath, r.logTail())
}
