package pgpipe

import (
	"context"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"replab/internal/engine"
)

// The commit's position, for the lag probe's position method
// (engine.PositionPipe). PostgreSQL tells no client where its commit
// record lies, so a positioned transaction reads a WAL position right
// after its commit, in the same write and the same round trip:
//
//	BEGIN, the calls, COMMIT, SELECT pg_current_wal_flush_lsn(), Sync
//
// COMMIT sent as a statement of the extended protocol commits when it is
// executed, not at the Sync (exec_execute_message finishes a transaction
// control statement at once), waiting as any commit does for the WAL
// flush and the synchronous standbys; the SELECT then runs in a
// transaction of its own. One Sync, so one ReadyForQuery and one flush of
// the replies: the client wakes once, as for any transaction. (Reading the
// position after the Sync, with a FunctionCall, costs a second
// ReadyForQuery — the server's flush, its statistics and process title, a
// second wake-up of the client —: 15–17 µs of CPU per transaction in the
// first lag-all runs, 8–10 of them the primary's. This form trades that
// for BEGIN and COMMIT as statements and a SELECT's portal.)
//
// Which position:
//
//   - With synchronous_commit on (or local, remote_write, remote_apply) the
//     commit flushed the WAL up to its record's end before it returned, so
//     pg_current_wal_flush_lsn() is at or past that end. It is the tighter
//     of the two: a replica can only ever receive flushed WAL, and what
//     was flushed after the commit went in the same flush or a later one.
//   - With synchronous_commit = off the commit returns before its record is
//     flushed (the WAL writer flushes it within wal_writer_delay): the
//     flush position may lie before the record, and only the insert
//     position, pg_current_wal_insert_lsn(), is at or past it (it may also
//     hold other sessions' records inserted since, never only earlier
//     ones).
//
// The setting is the session's when the pipe opens (a pipe runs no session
// statements, so it stays so).
//
// An insert position never lies inside a page header, while a replica's
// replay position — the end of the last record it replayed — lies on the
// page boundary when that record ended there: a position just past a page
// header is taken back to the boundary, so that a commit whose record
// ended a page is seen when the replica has replayed it, not only once the
// next record arrives. (A flush position is a record's end already.)

// RunPositioned implements engine.PositionPipe.
func (p *pipe) RunPositioned(ctx context.Context, calls []engine.PipeCall, beforeSend func(), rows []int64) (int64, error) {
	if p.lsn.sel == nil {
		return 0, p.run(ctx, calls, beforeSend, rows, true, nil)
	}
	var pos int64
	if err := p.run(ctx, calls, beforeSend, rows, true, &pos); err != nil {
		return 0, err
	}
	return pos, nil
}

var _ engine.PositionPipe = (*pipe)(nil)

// insertLSN is the position statement, and what it takes to read its
// answer.
type insertLSN struct {
	sel      []byte // Bind/Execute of the prepared SELECT; nil: no positions
	blk, seg int64  // wal_block_size, wal_segment_size in bytes
}

// Page headers (SizeOfXLogShortPHD, SizeOfXLogLongPHD in xlog_internal.h):
// every WAL page starts with the short one, a segment's first page with
// the long one.
const (
	shortPageHeader = 24
	longPageHeader  = 40
)

// lsnStmt is the position statement's name on the pipe's connection.
const lsnStmt = pipeStmtName + "lsn"

// lookUpInsertLSN prepares the position statement for the session's
// synchronous_commit and reads the WAL's page and segment sizes on pc; the
// zero insertLSN (no positions) when it cannot.
func lookUpInsertLSN(ctx context.Context, pc *pgconn.PgConn) insertLSN {
	rs, err := pc.Exec(ctx, `SELECT current_setting('synchronous_commit'), current_setting('wal_block_size'),
		(SELECT setting FROM pg_settings WHERE name = 'wal_segment_size')`).ReadAll()
	if err != nil || len(rs) != 1 || len(rs[0].Rows) != 1 || len(rs[0].Rows[0]) != 3 {
		return insertLSN{}
	}
	row := rs[0].Rows[0]
	blk, err1 := strconv.ParseInt(string(row[1]), 10, 64)
	seg, err2 := strconv.ParseInt(string(row[2]), 10, 64)
	if err1 != nil || err2 != nil || blk <= longPageHeader || seg < blk || seg%blk != 0 {
		return insertLSN{}
	}
	fn := "pg_current_wal_flush_lsn()"
	if string(row[0]) == "off" {
		fn = "pg_current_wal_insert_lsn()"
	}
	if _, err := pc.Prepare(ctx, lsnStmt, "SELECT "+fn, nil); err != nil {
		return insertLSN{}
	}
	b, start := beginMsg(nil, 'B')
	b = append(b, 0) // unnamed portal
	b = append(b, lsnStmt...)
	b = append(b, 0, 0, 0, 0, 0, 0, 0) // no formats, no parameters, text results
	b = endMsg(b, start)
	return insertLSN{sel: append(b, 'E', 0, 0, 0, 9, 0, 0, 0, 0, 0), blk: blk, seg: seg}
}

// decode reads the position statement's DataRow (one pg_lsn in text,
// "16/B374D848") and takes it back over a page header.
func (l insertLSN) decode(body []byte) (int64, bool) {
	if len(body) < 6 || body[0] != 0 || body[1] != 1 {
		return 0, false
	}
	hi, lo, ok := strings.Cut(string(body[6:]), "/")
	if !ok {
		return 0, false // NULL, or not a pg_lsn
	}
	h, err1 := strconv.ParseUint(hi, 16, 32)
	w, err2 := strconv.ParseUint(lo, 16, 32)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return l.boundary(int64(h<<32 | w)), true
}

// boundary is lsn, or the page boundary just before it when lsn is where
// the first record of a page would start.
func (l insertLSN) boundary(lsn int64) int64 {
	switch {
	case lsn%l.seg == longPageHeader:
		return lsn - longPageHeader
	case lsn%l.blk == shortPageHeader:
		return lsn - shortPageHeader
	}
	return lsn
}
