// Package pipeline is replab's change-data-capture pipeline, the
// architecture of the GoldenGate study: an extract decodes a PostgreSQL
// slot into a local trail, a pump ships the trail to a collector in a far
// site, and a replicat applies a trail to a sink database. Each stage is
// a function that runs until its context ends; the stage processes and the
// scheme that places them in sites are built on top.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"replab/internal/pipeline/trail"
)

// DialFunc opens a connection as a client in some site would.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// ExtractConfig configures an extract.
type ExtractConfig struct {
	// DSN is the source primary's connection string (libpq form);
	// replication=database is added.
	DSN string
	// Slot is the logical replication slot (pgoutput) to read; it must
	// exist (CreateSlot makes one).
	Slot string
	// Publications name what is decoded.
	Publications []string
	// Trail is the local trail's path.
	Trail string
	// SyncEvery bounds how long a decoded commit may wait in memory before
	// the trail is fsynced (a group commit: default 5 ms). The slot is
	// confirmed only up to what is durable.
	SyncEvery time.Duration
	// Dial, when set, opens the connection (a lab site's dialer).
	Dial DialFunc `json:"-"`
}

// Counters are a stage's running totals, read while it runs.
type Counters struct {
	Records      atomic.Int64 // change records (LCRs): inserts, updates, deletes
	Transactions atomic.Int64 // source transactions
	Bytes        atomic.Int64 // trail bytes written (extract, collector), shipped (pump) or read (replicat)
	Syncs        atomic.Int64 // fsyncs of the trail (extract, collector) or sink commits (replicat)
	Position     atomic.Uint64
	// LastCommitNs is the source commit time (Unix ns) of the last
	// transaction the stage finished with.
	LastCommitNs atomic.Int64
}

// CreateSlot creates a logical replication slot for pgoutput at the
// source, unless one of that name exists. The slot is created without
// exporting a snapshot: the pipeline starts with tables that already hold
// the same data at both ends (or none).
func CreateSlot(ctx context.Context, dsn, slot string, dial DialFunc) error {
	conn, err := connectReplication(ctx, dsn, dial)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = pglogrepl.CreateReplicationSlot(ctx, conn, slot, "pgoutput", pglogrepl.CreateReplicationSlotOptions{SnapshotAction: "NOEXPORT_SNAPSHOT"})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42710" { // duplicate_object
		return nil
	}
	if err != nil {
		return fmt.Errorf("create replication slot %s: %w", slot, err)
	}
	return nil
}

func connectReplication(ctx context.Context, dsn string, dial DialFunc) (*pgconn.PgConn, error) {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("source connection string: %w", err)
	}
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["replication"] = "database"
	if dial != nil {
		cfg.DialFunc = pgconn.DialFunc(dial)
	}
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to the source for replication: %w", err)
	}
	return conn, nil
}

// Extract reads the slot into the trail until ctx ends (it then returns
// nil) or something fails. A restart resumes where the trail ends: the
// slot was confirmed only up to the trail's last durable commit, and a
// transaction the trail already holds (its commit at or before the trail's
// last) is dropped when the source sends it again.
func Extract(ctx context.Context, cfg ExtractConfig, c *Counters) error {
	if c == nil {
		c = new(Counters)
	}
	if cfg.SyncEvery <= 0 {
		cfg.SyncEvery = 5 * time.Millisecond
	}
	w, err := trail.Create(cfg.Trail)
	if err != nil {
		return err
	}
	defer w.Close()
	conn, err := connectReplication(ctx, cfg.DSN, cfg.Dial)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())

	x := &extractor{w: w, c: c, rels: map[uint32]*pglogrepl.RelationMessage{}, durable: w.LastCommit()}
	c.Position.Store(x.durable)
	pubs := make([]string, len(cfg.Publications))
	for i, p := range cfg.Publications {
		pubs[i] = quoteIdent(p)
	}
	args := []string{"proto_version '1'", "publication_names '" + strings.Join(pubs, ",") + "'"}
	if err := pglogrepl.StartReplication(ctx, conn, cfg.Slot, pglogrepl.LSN(x.durable), pglogrepl.StartReplicationOptions{PluginArgs: args}); err != nil {
		return fmt.Errorf("start replication from slot %s: %w", cfg.Slot, err)
	}

	// Status updates: after each sync, and at least every 10 s (the
	// server's wal_sender_timeout is 60 s).
	const statusEvery = 10 * time.Second
	nextStatus := time.Now().Add(statusEvery)
	for {
		if ctx.Err() != nil {
			_, err := x.sync()
			return err
		}
		deadline := nextStatus
		if x.pending {
			deadline = x.firstPending.Add(cfg.SyncEvery)
		}
		if time.Now().After(deadline) {
			synced, err := x.sync()
			if err != nil {
				return err
			}
			if synced || time.Now().After(nextStatus) {
				if err := x.status(ctx, conn); err != nil {
					return err
				}
				nextStatus = time.Now().Add(statusEvery)
			}
			continue
		}
		rctx, cancel := context.WithDeadline(ctx, deadline)
		msg, err := conn.ReceiveMessage(rctx)
		cancel()
		if err != nil {
			if pgconn.Timeout(err) || ctx.Err() != nil {
				continue
			}
			return fmt.Errorf("receive from slot %s: %w", cfg.Slot, err)
		}
		switch m := msg.(type) {
		case *pgproto3.CopyData:
			if err := x.copyData(ctx, conn, m.Data); err != nil {
				return err
			}
		case *pgproto3.ErrorResponse:
			return fmt.Errorf("slot %s: %s", cfg.Slot, m.Message)
		}
	}
}

// extractor is Extract's state between messages.
type extractor struct {
	w    *trail.Writer
	c    *Counters
	rels map[uint32]*pglogrepl.RelationMessage

	durable      uint64 // the last commit LSN the trail holds durably
	walEnd       uint64 // the server's WAL end from its last keepalive
	inTx, skip   bool   // inside a transaction; dropping it (the trail has it)
	pending      bool   // commits appended but not synced
	firstPending time.Time
	rec          trail.Record
}

func (x *extractor) copyData(ctx context.Context, conn *pgconn.PgConn, data []byte) error {
	if len(data) == 0 {
		return nil
	}
	switch data[0] {
	case pglogrepl.PrimaryKeepaliveMessageByteID:
		k, err := pglogrepl.ParsePrimaryKeepaliveMessage(data[1:])
		if err != nil {
			return fmt.Errorf("keepalive: %w", err)
		}
		x.walEnd = uint64(k.ServerWALEnd)
		if k.ReplyRequested {
			if _, err := x.sync(); err != nil {
				return err
			}
			return x.status(ctx, conn)
		}
	case pglogrepl.XLogDataByteID:
		xld, err := pglogrepl.ParseXLogData(data[1:])
		if err != nil {
			return fmt.Errorf("xlog data: %w", err)
		}
		return x.decode(xld.WALData)
	}
	return nil
}

// decode turns one pgoutput message into trail records.
func (x *extractor) decode(wal []byte) error {
	msg, err := pglogrepl.Parse(wal)
	if err != nil {
		return fmt.Errorf("decode pgoutput: %w", err)
	}
	r := &x.rec
	*r = trail.Record{Columns: r.Columns[:0], Values: r.Values[:0], Key: r.Key[:0]}
	switch m := msg.(type) {
	case *pglogrepl.RelationMessage:
		x.rels[m.RelationID] = m
		return nil
	case *pglogrepl.BeginMessage:
		x.inTx = true
		// The trail's commits are end LSNs; a transaction whose commit
		// record lies before the last one the trail holds is in it.
		x.skip = uint64(m.FinalLSN) < x.durable
		if x.skip {
			return nil
		}
		r.Op, r.LSN, r.XID, r.Time = trail.OpBegin, uint64(m.FinalLSN), m.Xid, m.CommitTime.UnixNano()
	case *pglogrepl.CommitMessage:
		x.inTx = false
		if x.skip {
			return nil
		}
		r.Op, r.LSN, r.Time = trail.OpCommit, uint64(m.TransactionEndLSN), m.CommitTime.UnixNano()
	case *pglogrepl.InsertMessage:
		if x.skip {
			return nil
		}
		if err := x.change(r, trail.OpInsert, m.RelationID, m.Tuple, nil); err != nil {
			return err
		}
	case *pglogrepl.UpdateMessage:
		if x.skip {
			return nil
		}
		if err := x.change(r, trail.OpUpdate, m.RelationID, m.NewTuple, m.OldTuple); err != nil {
			return err
		}
	case *pglogrepl.DeleteMessage:
		if x.skip {
			return nil
		}
		if err := x.change(r, trail.OpDelete, m.RelationID, m.OldTuple, nil); err != nil {
			return err
		}
	case *pglogrepl.TruncateMessage:
		if !x.skip {
			return errors.New("the source truncated a published table: the pipeline carries DML only (insert, update, delete)")
		}
		return nil
	default:
		return nil // type and origin messages carry nothing to apply
	}
	end, err := x.w.Append(r)
	if err != nil {
		return err
	}
	x.c.Bytes.Store(int64(end))
	switch r.Op {
	case trail.OpInsert, trail.OpUpdate, trail.OpDelete:
		x.c.Records.Add(1)
	case trail.OpCommit:
		x.c.Transactions.Add(1)
		x.c.LastCommitNs.Store(r.Time)
		if !x.pending {
			x.pending, x.firstPending = true, time.Now()
		}
	}
	return nil
}

// change fills r from a row message. For a delete, tuple is the old key
// (or the whole old row with REPLICA IDENTITY FULL); for an update, old
// is the old key when the key changed.
func (x *extractor) change(r *trail.Record, op trail.Op, rel uint32, tuple, old *pglogrepl.TupleData) error {
	m, ok := x.rels[rel]
	if !ok {
		return fmt.Errorf("a change to relation %d before its description", rel)
	}
	if tuple == nil {
		return fmt.Errorf("%s on %s.%s without a row (is the table's REPLICA IDENTITY NOTHING?)", op, m.Namespace, m.RelationName)
	}
	r.Op, r.Schema, r.Table = op, m.Namespace, m.RelationName
	for i, col := range m.Columns {
		if i >= len(tuple.Columns) {
			break
		}
		d := tuple.Columns[i]
		isKey := col.Flags&1 != 0
		if op == trail.OpDelete && d.DataType == pglogrepl.TupleDataTypeNull && !isKey {
			continue // a key-only old tuple: the other columns are absent
		}
		switch d.DataType {
		case pglogrepl.TupleDataTypeToast:
			// Unchanged TOASTed value: not sent, and not to be set.
			continue
		case pglogrepl.TupleDataTypeNull:
			r.Values = append(r.Values, trail.Value{Null: true})
		default:
			r.Values = append(r.Values, trail.Value{Text: string(d.Data)})
		}
		if isKey {
			r.Key = append(r.Key, len(r.Columns))
		}
		r.Columns = append(r.Columns, col.Name)
	}
	if len(r.Key) == 0 && op != trail.OpInsert {
		return fmt.Errorf("%s on %s.%s: the table has no primary key (replica identity), so the change cannot be applied by key", op, m.Namespace, m.RelationName)
	}
	if old != nil && op == trail.OpUpdate {
		for i, col := range m.Columns {
			if col.Flags&1 == 0 || i >= len(old.Columns) {
				continue
			}
			d := old.Columns[i]
			if d.DataType == pglogrepl.TupleDataTypeNull {
				r.Old = append(r.Old, trail.Value{Null: true})
			} else {
				r.Old = append(r.Old, trail.Value{Text: string(d.Data)})
			}
		}
	}
	return nil
}

// sync makes the appended records durable; it says whether there were
// any.
func (x *extractor) sync() (bool, error) {
	if !x.pending {
		return false, nil
	}
	_, commit, err := x.w.Sync()
	if err != nil {
		return false, err
	}
	x.c.Syncs.Add(1)
	x.pending = false
	if commit > x.durable {
		x.durable = commit
		x.c.Position.Store(commit)
	}
	return true, nil
}

// status confirms to the source what the trail holds durably. Outside a
// transaction, with nothing pending, everything the server has sent is
// done with, so its WAL end is confirmed too: WAL that decodes to nothing
// (other tables, other databases) does not pile up behind the slot.
func (x *extractor) status(ctx context.Context, conn *pgconn.PgConn) error {
	pos := x.durable
	if !x.inTx && !x.pending && x.walEnd > pos {
		pos = x.walEnd
	}
	if err := pglogrepl.SendStandbyStatusUpdate(ctx, conn, pglogrepl.StandbyStatusUpdate{WALWritePosition: pglogrepl.LSN(pos)}); err != nil {
		return fmt.Errorf("confirm %s to the source: %w", pglogrepl.LSN(pos), err)
	}
	return nil
}

func quoteIdent(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}
