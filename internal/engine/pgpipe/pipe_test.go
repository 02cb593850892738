package pgpipe

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"

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
			req, implicit, err := p.encode(nil, tc.calls, tc.tx, nil)
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
	if _, _, err := p.encode(nil, []engine.PipeCall{{Stmt: 5}}, true, nil); err == nil {
		t.Error("no statement 5, yet encoded")
	}
}

// TestAppendArgPointers: a pointer (a workload's Scratch) leaves as what
// it points to, a nil one as NULL, and encoding such a transaction
// allocates nothing once the request buffer has grown.
func TestAppendArgPointers(t *testing.T) {
	p := &pipe{}
	text, id := []byte("a description"), int64(12345)
	null := []byte{0xff, 0xff, 0xff, 0xff}
	for _, tc := range []struct {
		name string
		oid  uint32
		arg  any
		want any // what arg must encode as (nil: NULL)
	}{
		{"*[]byte, text", pgtype.TextOID, &text, text},
		{"*[]byte, varchar", pgtype.VarcharOID, &text, string(text)},
		{"*[]byte, bytea", pgtype.ByteaOID, &text, text},
		{"*int64, int4", pgtype.Int4OID, &id, id},
		{"*int64, int8", pgtype.Int8OID, &id, int64(12345)},
		{"nil *[]byte", pgtype.TextOID, (*[]byte)(nil), nil},
		{"*[]byte of nil", pgtype.TextOID, new([]byte), nil},
		{"nil []byte", pgtype.TextOID, []byte(nil), nil},
		{"nil *int64", pgtype.Int8OID, (*int64)(nil), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, gotFormat, err := p.appendArg(nil, tc.oid, tc.arg)
			if err != nil {
				t.Fatal(err)
			}
			want, wantFormat := null, int16(pgtype.TextFormatCode)
			if tc.want != nil {
				if want, wantFormat, err = p.appendArg(nil, tc.oid, tc.want); err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(got, want) || gotFormat != wantFormat {
				t.Errorf("%x (format %d), want %x (format %d)", got, gotFormat, want, wantFormat)
			}
		})
	}
	p.stmts = []pipeStmt{{name: "b"}, {name: "c"}, {name: "r"}, {name: "u", oids: []uint32{pgtype.TextOID, pgtype.Int4OID}, dml: true}}
	calls := []engine.PipeCall{{Stmt: 0, Args: []any{&text, &id}}}
	req, _, err := p.encode(nil, calls, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() {
		id++
		req, _, _ = p.encode(req[:0], calls, true, nil)
	}); n != 0 {
		t.Errorf("encoding allocates %.0f times per transaction, want 0", n)
	}
}

// TestInsertLSN: the position statement's answer, taken back over a page
// header to the boundary a replica's replay position shows; a positioned
// transaction is BEGIN, the calls, COMMIT, the statement, one Sync.
func TestInsertLSN(t *testing.T) {
	l := insertLSN{blk: 8192, seg: 16 << 20}
	const seg = 16 << 20
	row := func(s string) []byte {
		b := []byte{0, 1}
		b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
		return append(b, s...)
	}
	for _, tc := range []struct{ lsn, want int64 }{
		{3*seg + 5*8192 + 24, 3*seg + 5*8192}, // a page's first record would start here
		{3*seg + 40, 3 * seg},                 // a segment's
		{3*seg + 5*8192 + 25, 3*seg + 5*8192 + 25},
		{0x16_B374D848, 0x16_B374D848},
	} {
		text := fmt.Sprintf("%X/%X", tc.lsn>>32, tc.lsn&0xffffffff)
		if got, ok := l.decode(row(text)); !ok || got != tc.want {
			t.Errorf("decode(%s) = %X, %v; want %X", text, got, ok, tc.want)
		}
	}
	if _, ok := l.decode([]byte{0, 1, 0xff, 0xff, 0xff, 0xff}); ok {
		t.Error("a NULL decoded")
	}
	p := &pipe{}
	for i, q := range []string{"BEGIN", "COMMIT", "ROLLBACK", "UPDATE t SET n = n + 1 WHERE id = $1"} {
		p.stmts = append(p.stmts, pipeStmt{name: pipeStmtName + string(rune('0'+i)), oids: make([]uint32, bytes.Count([]byte(q), []byte("$"))), dml: i >= pipeBuiltin && plainDML(q)})
	}
	p.begin, p.commit = p.appendBindExecute(nil, 0), p.appendBindExecute(nil, 1)
	sel := []byte("<the position statement>")
	req, implicit, err := p.encode(nil, []engine.PipeCall{{Stmt: 0, Args: []any{int64(7)}}}, true, sel)
	if err != nil {
		t.Fatal(err)
	}
	want := append(append(append([]byte(nil), p.commit...), sel...), 'S', 0, 0, 0, 4)
	if implicit || !bytes.HasPrefix(req, p.begin) || !bytes.HasSuffix(req, want) || bytes.Count(req, []byte{'S', 0, 0, 0, 4}) != 1 {
		t.Errorf("positioned request %q (implicit %v): want BEGIN … COMMIT, the statement, one Sync", req, implicit)
	}
}
