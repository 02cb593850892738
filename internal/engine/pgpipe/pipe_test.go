package pgpipe

import (
	"bytes"
	"testing"

	"replab/internal/engine"
)

func TestPlainDML(t *testing.T) {
	for _, tc := range []struct {
		q    string
		want bool
	}{
		{"UPDATE per SET t = $1 WHERE id = $2", true},
		{"  insert into t values ($1)", true},
		{"\n-- the order\nSELECT * FROM o WHERE id = $1 FOR UPDATE", true},
		{"/* a comment */ delete from t", true},
		{"WITH x AS (UPDATE t SET n = n + 1 RETURNING *) SELECT count(*) FROM x", true},
		{"(SELECT 1)", true},
		{"values (1)", true},
		{"LOCK TABLE t IN SHARE MODE", false},
		{"SAVEPOINT a", false},
		{"SET LOCAL work_mem = '1MB'", false},
		{"DECLARE c CURSOR FOR SELECT 1", false},
		{"SELECTED", false},
		{"-- only a comment", false},
		{"/* unterminated", false},
		{"", false},
	} {
		if got := plainDML(tc.q); got != tc.want {
			t.Errorf("plainDML(%q) = %v, want %v", tc.q, got, tc.want)
		}
	}
}

// TestEncode checks what leaves for a transaction: plain DML as an
// implicit transaction (no BEGIN or COMMIT, one Sync), anything else
// between BEGIN and COMMIT, and autocommit calls each with its Sync.
func TestEncode(t *testing.T) {
	p := &pipe{}
	for i, q := range []string{"BEGIN", "COMMIT", "ROLLBACK", "UPDATE t SET n = n + 1 WHERE id = $1", "LOCK TABLE t IN SHARE MODE"} {
		p.stmts = append(p.stmts, pipeStmt{name: pipeStmtName + string(rune('0'+i)), oids: make([]uint32, bytes.Count([]byte(q), []byte("$"))), dml: i >= pipeBuiltin && plainDML(q)})
	}
	p.begin, p.commit = p.appendBindExecute(nil, 0), p.appendBindExecute(nil, 1)
	update := engine.PipeCall{Stmt: 0, Args: []any{int64(7)}}
	lock := engine.PipeCall{Stmt: 1}
	sync := []byte{'S', 0, 0, 0, 4}
	syncs := func(b []byte) int { return bytes.Count(b, sync) }
	for _, tc := range []struct {
		name     string
		calls    []engine.PipeCall
		tx       bool
		implicit bool
		syncs    int
	}{
		{"DML only: implicit", []engine.PipeCall{update, update}, true, true, 1},
		{"a LOCK: BEGIN … COMMIT", []engine.PipeCall{update, lock}, true, false, 1},
		{"autocommit", []engine.PipeCall{update, update}, false, false, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, implicit, err := p.encode(nil, tc.calls, tc.tx)
			if err != nil {
				t.Fatal(err)
			}
			block := bytes.HasPrefix(req, p.begin) && bytes.Contains(req, p.commit)
			if implicit != tc.implicit || block != (tc.tx && !tc.implicit) || syncs(req) != tc.syncs {
				t.Errorf("implicit %v, BEGIN…COMMIT %v, %d Syncs; want implicit %v, BEGIN…COMMIT %v, %d Syncs",
					implicit, block, syncs(req), tc.implicit, tc.tx && !tc.implicit, tc.syncs)
			}
			if !bytes.HasSuffix(req, sync) {
				t.Error("the request does not end with Sync")
			}
		})
	}
	if _, _, err := p.encode(nil, []engine.PipeCall{{Stmt: 5}}, true); err == nil {
		t.Error("no statement 5, yet encoded")
	}
}
