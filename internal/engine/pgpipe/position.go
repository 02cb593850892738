package pgpipe

import (
	"context"
	"encoding/binary"
	"strconv"

	"github.com/jackc/pgx/v5/pgconn"

	"replab/internal/engine"
)

// The commit's position, for the lag probe's position method
// (engine.PositionPipe). PostgreSQL tells no client where its commit
// record lies, so the transaction is followed, in the same write, by a
// call that reads a WAL position: the server runs it after the Sync that
// committed the transaction, so the position is read after the commit
// record was inserted — and, unless synchronous_commit is off, flushed.
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
// The call is a fast-path function call (the protocol's FunctionCall
// message, as libpq's PQfn sends it): no parse, plan or portal, cheaper for
// the server than a SELECT. It costs a second ReadyForQuery: the server
// flushes after the Sync and again after the call, and the client reads
// on until the second.
//
// An insert position never lies inside a page header, while a replica's
// replay position — the end of the last record it replayed — lies on the
// page boundary when that record ended there: a position just past a page
// header is taken back to the boundary, so that a commit whose record
// ended a page is seen when the replica has replayed it, not only once the
// next record arrives. (A flush position is a record's end already.)

// RunPositioned implements engine.PositionPipe.
func (p *pipe) RunPositioned(ctx context.Context, calls []engine.PipeCall, beforeSend func(), rows []int64) (int64, error) {
	if p.lsn.call == nil {
		return 0, p.run(ctx, calls, beforeSend, rows, true, nil)
	}
	var pos int64
	err := p.run(ctx, calls, beforeSend, rows, true, &pos)
	if err != nil {
		return 0, err
	}
	return pos, nil
}

var _ engine.PositionPipe = (*pipe)(nil)

// insertLSN is the position call, and what it takes to read its answer.
type insertLSN struct {
	call     []byte // FunctionCall of pg_current_wal_flush_lsn or _insert_lsn, binary result; nil: unknown
	blk, seg int64  // wal_block_size, wal_segment_size in bytes
}

// Page headers (SizeOfXLogShortPHD, SizeOfXLogLongPHD in xlog_internal.h):
// every WAL page starts with the short one, a segment's first page with
// the long one.
const (
	shortPageHeader = 24
	longPageHeader  = 40
)

// lookUpInsertLSN finds the position function for the session's
// synchronous_commit and the WAL's page and segment sizes on pc; the zero
// insertLSN (no positions) when it cannot.
func lookUpInsertLSN(ctx context.Context, pc *pgconn.PgConn) insertLSN {
	rs, err := pc.Exec(ctx, `SELECT CASE current_setting('synchronous_commit') WHEN 'off' THEN 'pg_current_wal_insert_lsn()' ELSE 'pg_current_wal_flush_lsn()' END::regprocedure::oid,
		current_setting('wal_block_size'), (SELECT setting FROM pg_settings WHERE name = 'wal_segment_size')`).ReadAll()
	if err != nil || len(rs) != 1 || len(rs[0].Rows) != 1 || len(rs[0].Rows[0]) != 3 {
		return insertLSN{}
	}
	row := rs[0].Rows[0]
	oid, err1 := strconv.ParseUint(string(row[0]), 10, 32)
	blk, err2 := strconv.ParseInt(string(row[1]), 10, 64)
	seg, err3 := strconv.ParseInt(string(row[2]), 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || blk <= longPageHeader || seg < blk || seg%blk != 0 {
		return insertLSN{}
	}
	return insertLSN{call: functionCall(uint32(oid)), blk: blk, seg: seg}
}

// functionCall encodes FunctionCall of a function without arguments, its
// result in binary.
func functionCall(oid uint32) []byte {
	b := []byte{'F', 0, 0, 0, 14}
	b = binary.BigEndian.AppendUint32(b, oid)
	return append(b, 0, 0, 0, 0, 0, 1) // no argument formats, no arguments, binary result
}

// decode reads FunctionCallResponse's pg_lsn (8 bytes, big-endian) and
// takes it back over a page header.
func (l insertLSN) decode(body []byte) (int64, bool) {
	if len(body) != 4+8 || binary.BigEndian.Uint32(body) != 8 {
		return 0, false // NULL or not a pg_lsn
	}
	return l.boundary(int64(binary.BigEndian.Uint64(body[4:]))), true
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
