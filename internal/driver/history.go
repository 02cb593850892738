package driver

import (
	"context"
	"errors"
	"fmt"

	"replab/internal/engine"
	"replab/internal/history"
	"replab/internal/workload"
)

// Recording the history (Config.History, [run] history): every attempt
// of every transaction is one operation — a retried transaction is one
// operation per attempt — with the user's process number, the node its
// connection goes to, its invocation and completion on the driver's
// clock (Config.Now, the lab's one clock), the workload's
// micro-operations (workload.Recorder) and its outcome:
//
//   - ok: it committed (COMMIT answered; a pipelined transaction whose
//     counts came back wrong committed too, whatever error the driver
//     then counts against it);
//   - fail: it certainly did not commit: an error before its COMMIT was
//     sent (including a connection found dead before anything was sent),
//     or an error the server answered the COMMIT with (it rolled back: a
//     serialization failure at commit, a deadlock);
//   - info: unknown — the COMMIT was sent and no answer came: the
//     connection broke, the context ended, a timeout. Its writes may or
//     may not have happened.
//
// An operation that is not SQL (TxType.Op) has no COMMIT the driver can
// see: an error is info unless the engine classes it as a lost conflict
// (certainly aborted).
//
// A user that has an info operation takes a new process number, above
// every user's own (Config.Users, Users+1, …), as Jepsen does: the
// transaction in doubt may still be running, and a process never has two
// operations in flight. Reads of fail and info operations are recorded as
// not known (null). Every phase is recorded; the Result counts how many
// were invoked in the measure phase.

// HistoryCount is what the driver recorded.
type HistoryCount struct {
	Operations int64 // every attempt recorded
	Measure    int64 // of them, invoked in the measure phase
	Info       int64 // of them, with an unknown outcome
	// Processes is how many process numbers were used: the users', and
	// one more after each info operation.
	Processes int
	// Err is the first error writing the history, which stopped the run
	// ("" when none).
	Err string
}

// startRecord gives the attempt about to start its recorder, or nil when
// the run records none (or a HistorySampler declines it).
func (u *user) startRecord() *workload.Recorder {
	d := u.d
	if d.cfg.History == nil {
		return nil
	}
	if d.sampler != nil && !d.sampler.RecordAt(d.cfg.Now()) {
		return nil
	}
	u.hrec.Reset()
	return &u.hrec
}

// outcome is what became of an attempt that returned err: ok, fail or
// info (see above), from what the attempt says was sent and committed.
func (u *user) outcome(ctx context.Context, ut *userType, err error, class engine.ErrorClass) history.Type {
	switch {
	case err == nil || u.sending.committed:
		return history.OK
	case ut.t.Op != nil:
		// An Op knows better than the driver what it sent: a read changes
		// nothing whatever happened to it, and an engine says when nothing
		// certainly committed (engine.ErrNotCommitted).
		if class.Conflict || ut.t.ReadOnly || errors.Is(err, engine.ErrNotCommitted) {
			return history.Fail
		}
		return history.Info
	case !u.sending.sent || unsent(err):
		return history.Fail
	case ctx.Err() != nil || connLost(err) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		return history.Info
	}
	return history.Fail // the server answered the COMMIT: rolled back
}

// recordAttempt writes the attempt that ran from invoke to now and
// returned err (of class, the engine's classification) as one operation.
func (u *user) recordAttempt(ctx context.Context, ut *userType, rec *workload.Recorder, invoke, now int64, err error, class engine.ErrorClass) {
	d := u.d
	typ := u.outcome(ctx, ut, err, class)
	ms := rec.Mops()
	if typ != history.OK {
		// Reads of an attempt that did not commit are not observations.
		buf := append(u.hbuf[:0], ms...)
		for i := range buf {
			if buf[i].Fn == history.FnRead {
				buf[i] = history.ReadNull(buf[i].Key)
			}
		}
		u.hbuf, ms = buf, buf
	}
	node := rec.Node()
	if node == "" && ut.c != nil {
		node = ut.c.node
	}
	op := history.Op{Process: u.proc, Node: node, Type: typ, F: history.FTxn, InvokeNs: invoke, CompleteNs: max(now, invoke),
		TxnType: ut.t.Name, Value: ms}
	if typ != history.OK {
		op.Error = errorCode(ctx, err, class.Code)
	}
	if at := u.sending.at; at >= invoke && at <= op.CompleteNs && !ut.t.ReadOnly {
		op.CommitNs = at // when the COMMIT left: the lag probe's origin
	}
	if _, werr := d.cfg.History.Record(op); werr != nil {
		d.historyFailed(werr)
		return
	}
	d.histOps.Add(1)
	if d.phaseAt(invoke) == Measure {
		d.histMeasure.Add(1)
	}
	if typ == history.Info {
		d.histInfo.Add(1)
		u.proc = int(d.procs.Add(1)) - 1 // the transaction in doubt keeps the old one
		d.procMu.Lock()
		for len(d.procUser) <= u.proc {
			d.procUser = append(d.procUser, -1)
		}
		d.procUser[u.proc] = u.id
		d.procMu.Unlock()
	}
}

// errorCode is the history's error for a failed attempt: the engine's
// class, or what the driver knows of it.
func errorCode(ctx context.Context, err error, code string) string {
	switch {
	case err == nil:
		return "" // committed, though the driver counts an error
	case code != "" && code != "other":
		return code
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case ctx.Err() != nil || errors.Is(err, context.Canceled):
		return "interrupted"
	case connLost(err):
		return ErrConnection
	}
	return "other"
}

// historyFailed stops the run at the first error writing the history: a
// history with operations missing could not be checked.
func (d *run) historyFailed(err error) {
	reason := fmt.Sprintf("stopped: the history could not be written: %v", err)
	if d.stop.CompareAndSwap(nil, &reason) {
		d.histErr.Store(&reason)
		if c := d.cancel; c != nil {
			c()
		}
	}
}

// historyCount is the Result's History.
func (d *run) historyCount() *HistoryCount {
	if d.cfg.History == nil {
		return nil
	}
	h := &HistoryCount{Operations: d.histOps.Load(), Measure: d.histMeasure.Load(), Info: d.histInfo.Load(), Processes: int(d.procs.Load())}
	if e := d.histErr.Load(); e != nil {
		h.Err = *e
	}
	return h
}
