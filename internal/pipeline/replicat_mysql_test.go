package pipeline

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"replab/internal/enginekit"
	"replab/internal/pipeline/trail"
	"replab/internal/testkit"
)

// TestMariaDBStatements: the SQL a MariaDB replicat sends, statement by
// statement and batched (backticks, ? placeholders, "public" as the
// connection's database, a one-column key's deletes as IN, a composite
// key's OR-ed), and how a batched transaction becomes one text.
func TestMariaDBStatements(t *testing.T) {
	ins, del, upd := insAcct, delAcct, updItem
	delItem := func(a, b string) trail.Record {
		return trail.Record{Op: trail.OpDelete, Schema: "public", Table: "item", Columns: []string{"a", "b"}, Key: []int{0, 1},
			Values: []trail.Value{{Text: a}, {Text: b}}}
	}
	odd := trail.Record{Op: trail.OpInsert, Schema: "sales", Table: "we`ird", Columns: []string{"id", "q?"}, Key: []int{0},
		Values: []trail.Value{{Text: "1"}, {Text: "it's"}}}
	changes := []trail.Record{ins("1", "x"), ins("2", ""), upd, del("1"), del("2"), delItem("1", "a"), delItem("2", "b"), ins("3", "y"), odd}
	b := func(ss ...string) [][]byte {
		out := make([][]byte, len(ss))
		for i, s := range ss {
			if s != "NULL" {
				out[i] = []byte(s)
			}
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		batch  bool
		want   []stmt
		tables []string
	}{
		{"one by one", false, []stmt{
			{"INSERT INTO `acct` (`id`, `note`) VALUES (?, ?)", b("1", "x")},
			{"INSERT INTO `acct` (`id`, `note`) VALUES (?, ?)", b("2", "NULL")},
			{"UPDATE `item` SET `a` = ?, `b` = ?, `v` = ? WHERE `a` = ? AND `b` = ?", b("1", "k-new", "7", "1", "k")},
			{"DELETE FROM `acct` WHERE `id` = ?", b("1")},
			{"DELETE FROM `acct` WHERE `id` = ?", b("2")},
			{"DELETE FROM `item` WHERE `a` = ? AND `b` = ?", b("1", "a")},
			{"DELETE FROM `item` WHERE `a` = ? AND `b` = ?", b("2", "b")},
			{"INSERT INTO `acct` (`id`, `note`) VALUES (?, ?)", b("3", "y")},
			{"INSERT INTO `sales`.`we``ird` (`id`, `q?`) VALUES (?, ?)", b("1", "it's")},
		}, []string{"`acct`", "`acct`", "`item`", "`acct`", "`acct`", "`item`", "`item`", "`acct`", "`sales`.`we``ird`"}},
		{"batched", true, []stmt{
			{"INSERT INTO `acct` (`id`, `note`) VALUES (?, ?), (?, ?)", b("1", "x", "2", "NULL")},
			{"UPDATE `item` SET `a` = ?, `b` = ?, `v` = ? WHERE `a` = ? AND `b` = ?", b("1", "k-new", "7", "1", "k")},
			{"DELETE FROM `acct` WHERE `id` IN (?, ?)", b("1", "2")},
			{"DELETE FROM `item` WHERE (`a` = ? AND `b` = ?) OR (`a` = ? AND `b` = ?)", b("1", "a", "2", "b")},
			{"INSERT INTO `acct` (`id`, `note`) VALUES (?, ?)", b("3", "y")},
			{"INSERT INTO `sales`.`we``ird` (`id`, `q?`) VALUES (?, ?)", b("1", "it's")},
		}, []string{"`acct`", "`item`", "`acct`", "`item`", "`acct`", "`sales`.`we``ird`"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, tables := mysqlStatements(changes, tc.batch)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got\n%q\nwant\n%q", got, tc.want)
			}
			if !slices.Equal(tables, tc.tables) {
				t.Errorf("tables %q, want %q", tables, tc.tables)
			}
		})
	}

	// A batched transaction: one text, the checkpoint last, NULL a nil
	// parameter.
	stmts, _ := mysqlStatements(changes[:3], true)
	ck := mysqlCheckpoint("r1", trail.Record{LSN: 0x16B3790}, 1234)
	got := mysqlBatches(append(stmts, ck))
	want := []mysqlQuery{{
		sql: "START TRANSACTION; INSERT INTO `acct` (`id`, `note`) VALUES (?, ?), (?, ?); " +
			"UPDATE `item` SET `a` = ?, `b` = ?, `v` = ? WHERE `a` = ? AND `b` = ?; " +
			"UPDATE `replab_replicat_checkpoint` SET pos = ?, lsn = ?, applied_at = CURRENT_TIMESTAMP(6) WHERE name = ?; COMMIT",
		args: []any{"1", "x", "2", nil, "1", "k-new", "7", "1", "k", "1234", "23803792", "r1"},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("batch\n%#v\nwant\n%#v", got, want)
	}
	// A transaction too large for one text takes several, the first
	// beginning it and the last committing it.
	big := strings.Repeat("x", mysqlMaxQuery/5)
	var many []trail.Record
	for i := range 6 {
		many = append(many, ins(strconv.Itoa(i), big))
	}
	stmts, _ = mysqlStatements(many, false)
	got = mysqlBatches(append(stmts, ck))
	var nargs int
	for _, q := range got {
		nargs += len(q.args)
	}
	if len(got) != 3 || !strings.HasPrefix(got[0].sql, "START TRANSACTION; INSERT") || strings.Contains(got[1].sql, "START") ||
		!strings.HasSuffix(got[2].sql, "WHERE name = ?; COMMIT") || nargs != 2*6+3 {
		t.Errorf("6 statements of %d bytes in %d texts (want 3): %.60q …", len(big), len(got), got)
	}
	// A run longer than maxRows is cut into statements of maxRows.
	many = many[:0]
	for range maxRows + 1 {
		many = append(many, del("1"))
	}
	if got, _ := mysqlStatements(many, true); len(got) != 2 || len(got[0].args) != maxRows || len(got[1].args) != 1 {
		t.Errorf("%d deletes batched into %d statements, want %d rows and 1", maxRows+1, len(got), maxRows)
	}

	// The stage's JSON carries the engine, and only when set.
	j, _ := json.Marshal(ReplicatConfig{Engine: EngineMariaDB})
	j0, _ := json.Marshal(ReplicatConfig{})
	if !strings.Contains(string(j), `"engine":"mariadb"`) || strings.Contains(string(j0), "engine") {
		t.Errorf("JSON %s and %s", j, j0)
	}
	// Configurations refused before any connection.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tc := range []struct {
		cfg  ReplicatConfig
		want string
	}{
		{ReplicatConfig{Name: "r", Engine: "oracle"}, `unknown sink engine "oracle"`},
		{ReplicatConfig{Name: "r", Engine: EngineMariaDB, DSN: "u:p@tcp(127.0.0.1:9)/"}, "names no database"},
		{ReplicatConfig{Name: strings.Repeat("n", 201), Engine: EngineMariaDB, DSN: "u:p@tcp(127.0.0.1:9)/db"}, "longer than the 200 characters"},
	} {
		if err := Replicat(ctx, tc.cfg, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.cfg, err, tc.want)
		}
	}
}

// mariadbServer is a mariadbd of a test's own.
type mariadbServer struct {
	addr    string
	admin   *sql.DB // as the test's user, no default database
	cmd     *exec.Cmd
	exited  <-chan struct{}
	logPath string
}

// report says whether the server still runs, or how it ended, and the
// tail of its error log: a crash leaves its signal and stack there, a
// SIGKILL from outside nothing.
func (s *mariadbServer) report() string {
	state := "still running"
	select {
	case <-s.exited:
		state = fmt.Sprintf("exited during the test (%v)", s.cmd.ProcessState)
	default:
	}
	log, err := os.ReadFile(s.logPath)
	if err != nil {
		return fmt.Sprintf("mariadbd on %s %s; error log: %v", s.addr, state, err)
	}
	return fmt.Sprintf("mariadbd on %s %s; error log %s ends:\n%s", s.addr, state, s.logPath, enginekit.LastLines(string(log), 10))
}

const mariadbTestUser, mariadbTestPassword = "rt", "rt-pw"

// dsn is a go-sql-driver/mysql DSN for database db.
func (s *mariadbServer) dsn(db string) string {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd = mariadbTestUser, mariadbTestPassword
	cfg.Net, cfg.Addr, cfg.DBName = "tcp", s.addr, db
	return cfg.FormatDSN()
}

// startMariaDB installs and starts a mariadbd as replab's server user in
// a directory of its own, on a free port of 127.0.0.1; t.Cleanup stops it
// and removes the directory, whatever happens.
func startMariaDB(t *testing.T) *mariadbServer {
	t.Helper()
	testkit.Need(t, testkit.Lab, testkit.MariaDB)
	const serverBin, installBin = "/usr/sbin/mariadbd", "/usr/bin/mariadb-install-db"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// mariadbd will not run as root without --user: it runs as the
	// servers' unprivileged user, which owns the directory.
	uid, gid, err := enginekit.ServerCredentials(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "replab-mariadb-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) }) // last: after the server's stop
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	logPath := filepath.Join(dir, "error.log")
	cnf := filepath.Join(dir, "my.cnf")
	initSQL := filepath.Join(dir, "init.sql")
	files := map[string]string{
		cnf: strings.Join([]string{"[mysqld]",
			"datadir = " + filepath.Join(dir, "data"),
			"tmpdir = " + dir,
			"socket = " + filepath.Join(dir, "mariadbd.sock"),
			"pid_file = " + filepath.Join(dir, "mariadbd.pid"),
			"port = " + strconv.Itoa(port),
			"bind_address = 127.0.0.1",
			"log_error = " + logPath,
			"skip_name_resolve = ON",
			"character_set_server = utf8mb4",
			"collation_server = utf8mb4_bin",
			"innodb_buffer_pool_size = 32M",
			"innodb_log_file_size = 16M",
			// A test server: commits need not reach the disk.
			"innodb_flush_log_at_trx_commit = 2",
			""}, "\n"),
		// Anonymous users would shadow the test's.
		initSQL: "DELETE FROM mysql.global_priv WHERE User = '';\nFLUSH PRIVILEGES;\n" + fmt.Sprintf("CREATE USER IF NOT EXISTS '%s'@'%%' IDENTIFIED BY '%s';\nGRANT ALL PRIVILEGES ON *.* TO '%[1]s'@'%%';\n",
			mariadbTestUser, mariadbTestPassword),
		logPath: "",
	}
	for path, text := range files {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(path, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	install := exec.CommandContext(ctx, installBin, "--defaults-file="+cnf, "--skip-test-db",
		"--auth-root-authentication-method=socket", "--skip-name-resolve")
	enginekit.AsUser(install, uid, gid)
	install.WaitDelay = 5 * time.Second
	if out, err := install.CombinedOutput(); err != nil {
		log, _ := os.ReadFile(logPath)
		t.Fatalf("mariadb-install-db: %v\n%s\n%s", err, enginekit.LastLines(string(out), 10), enginekit.LastLines(string(log), 10))
	}
	server := exec.Command(serverBin, "--defaults-file="+cnf, "--init-file="+initSQL)
	enginekit.AsUser(server, uid, gid)
	// Should the test binary die, the server goes with it; not when a
	// thread of it does (StartTied).
	exited, err := testkit.StartTied(server)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { enginekit.StopServer(server, exited, syscall.SIGTERM, 20*time.Second) })

	s := &mariadbServer{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: server, exited: exited, logPath: logPath}
	// Before the stop above: a failed test says what became of the
	// server (its subtests fail with "invalid connection" or "connection
	// refused" when it has gone).
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(s.report())
		}
	})
	s.admin, err = sql.Open("mysql", s.dsn(""))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.admin.Close() })
	for {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		err := s.admin.PingContext(pctx)
		pcancel()
		if err == nil {
			return s
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(logPath)
			t.Fatalf("mariadbd exited during start-up (%v): %s", server.ProcessState, enginekit.LastLines(string(log), 10))
		case <-ctx.Done():
			log, _ := os.ReadFile(logPath)
			t.Fatalf("mariadbd did not accept connections: %v: %s", err, enginekit.LastLines(string(log), 10))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// The test's source tables, as PostgreSQL's pgoutput describes them, and
// their MariaDB twins. Text keys and values compare exactly under
// utf8mb4_bin, the test server's collation.
var mdbTables = []struct {
	name string
	cols []string
	key  []int
	ddl  string
}{
	{"acct", []string{"id", "bal", "note"}, []int{0}, "(id INT PRIMARY KEY, bal DECIMAL(12,2) NOT NULL, note TEXT)"},
	{"item", []string{"a", "b", "v"}, []int{0, 1}, "(a INT, b VARCHAR(64), v INT, PRIMARY KEY (a, b))"},
	// A reserved word, a ? and a backtick in names.
	{"order", []string{"id", "group?", "we`ird"}, []int{0}, "(id INT PRIMARY KEY, `group?` TEXT, `we``ird` VARCHAR(100) NOT NULL)"},
}

// mdbNotes is awkward text: quotes, escapes, what looks like SQL,
// comments and placeholders, UTF-8 beyond 3 bytes, the empty string (not
// NULL), a long value.
var mdbNotes = []string{"plain", "it's quoted", `back\slash`, `"double"`, "what?", "-- not a comment", "/* nor this */ #", "line\nbreak\ttab",
	"`backtick`", `\'; DROP TABLE acct; --`, "", "ünïcødé ✓ 😀", "100% _like_", "\x1a\\0", strings.Repeat("long text ", 300)}

// mdbTx is one source transaction of the test's trail.
type mdbTx struct {
	changes []trail.Record
	lsn     uint64 // the commit's end LSN
}

// mdbModel generates transactions and keeps the rows they leave.
type mdbModel struct {
	rng    *rand.Rand
	rows   []map[string][]trail.Value // per table: key -> row
	frozen map[string]bool            // table/key made by a key change: never touched again
	seq    int
	lsn    uint64
}

func newMdbModel() *mdbModel {
	m := &mdbModel{rng: rand.New(rand.NewPCG(42, 7)), frozen: map[string]bool{}, lsn: 0x1000000}
	for range mdbTables {
		m.rows = append(m.rows, map[string][]trail.Value{})
	}
	return m
}

func keyText(key []int, vals []trail.Value) string {
	var parts []string
	for _, k := range key {
		parts = append(parts, vals[k].Text)
	}
	return strings.Join(parts, "\x00")
}

// row makes a row of table ti with key values from key (nil: a fresh
// one).
func (m *mdbModel) row(ti int, key []trail.Value) []trail.Value {
	note := func() trail.Value {
		if m.rng.IntN(8) == 0 {
			return trail.Value{Null: true}
		}
		return trail.Value{Text: mdbNotes[m.rng.IntN(len(mdbNotes))]}
	}
	switch ti {
	case 0:
		if key == nil {
			key = []trail.Value{{Text: strconv.Itoa(m.rng.IntN(200))}}
		}
		c := m.rng.IntN(200001) - 100000
		sign := ""
		if c < 0 {
			sign, c = "-", -c
		}
		return []trail.Value{key[0], {Text: fmt.Sprintf("%s%d.%02d", sign, c/100, c%100)}, note()}
	case 1:
		if key == nil {
			key = []trail.Value{{Text: strconv.Itoa(m.rng.IntN(10))}, {Text: []string{"k0", "k1", "k2", "ключ"}[m.rng.IntN(4)]}}
		}
		return []trail.Value{key[0], key[1], {Text: strconv.Itoa(m.rng.IntN(2000) - 1000)}}
	default:
		if key == nil {
			key = []trail.Value{{Text: strconv.Itoa(m.rng.IntN(50))}}
		}
		w := mdbNotes[m.rng.IntN(len(mdbNotes))]
		if len(w) > 100 {
			w = w[:100]
		}
		return []trail.Value{key[0], note(), {Text: w}}
	}
}

// existing picks a row of table ti that may change, if any.
func (m *mdbModel) existing(ti int) (string, bool) {
	var keys []string
	for k := range m.rows[ti] {
		if !m.frozen[strconv.Itoa(ti)+"/"+k] {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return "", false
	}
	slices.Sort(keys)
	return keys[m.rng.IntN(len(keys))], true
}

func (m *mdbModel) insert(ti int, vals []trail.Value) trail.Record {
	t := mdbTables[ti]
	m.rows[ti][keyText(t.key, vals)] = vals
	return trail.Record{Op: trail.OpInsert, Schema: "public", Table: t.name, Columns: t.cols, Key: t.key, Values: vals}
}

func (m *mdbModel) delete(ti int, k string) trail.Record {
	t := mdbTables[ti]
	row := m.rows[ti][k]
	delete(m.rows[ti], k)
	var cols []string
	var vals []trail.Value
	var key []int
	for j, c := range t.key {
		cols, vals, key = append(cols, t.cols[c]), append(vals, row[c]), append(key, j)
	}
	return trail.Record{Op: trail.OpDelete, Schema: "public", Table: t.name, Columns: cols, Key: key, Values: vals}
}

// change makes one random change.
func (m *mdbModel) change() trail.Record {
	ti := m.rng.IntN(len(mdbTables))
	t := mdbTables[ti]
	k, ok := m.existing(ti)
	switch op := m.rng.IntN(8); {
	case op < 3 || !ok:
		for range 10 {
			vals := m.row(ti, nil)
			kt := keyText(t.key, vals)
			if _, dup := m.rows[ti][kt]; !dup && !m.frozen[strconv.Itoa(ti)+"/"+kt] {
				return m.insert(ti, vals)
			}
		}
		if !ok {
			return m.insert(ti, m.row(ti, []trail.Value{{Text: strconv.Itoa(5000 + m.next())}, {Text: "spare"}}))
		}
		fallthrough
	case op < 5:
		old := m.rows[ti][k]
		var key []trail.Value
		for _, c := range t.key {
			key = append(key, old[c])
		}
		vals := m.row(ti, key)
		m.rows[ti][k] = vals
		return trail.Record{Op: trail.OpUpdate, Schema: "public", Table: t.name, Columns: t.cols, Key: t.key, Values: vals}
	case op < 6:
		// A key change: the replicat must find the row by its old key.
		old := m.rows[ti][k]
		var oldKey []trail.Value
		for _, c := range t.key {
			oldKey = append(oldKey, old[c])
		}
		newKey := slices.Clone(oldKey)
		if ti == 1 {
			newKey[1] = trail.Value{Text: oldKey[1].Text + "-" + strconv.Itoa(m.next())}
		} else {
			newKey[0] = trail.Value{Text: strconv.Itoa(1000 + m.next())}
		}
		vals := m.row(ti, newKey)
		delete(m.rows[ti], k)
		nk := keyText(t.key, vals)
		m.rows[ti][nk] = vals
		// Never touched again: with Parts, its later changes would go to
		// another replicat than the key change (see SplitBy).
		m.frozen[strconv.Itoa(ti)+"/"+nk] = true
		return trail.Record{Op: trail.OpUpdate, Schema: "public", Table: t.name, Columns: t.cols, Key: t.key, Values: vals, Old: oldKey}
	default:
		return m.delete(ti, k)
	}
}

func (m *mdbModel) next() int { m.seq++; return m.seq }

// tx ends a transaction of changes.
func (m *mdbModel) tx(changes []trail.Record) mdbTx {
	m.lsn += 0x100
	return mdbTx{changes: changes, lsn: m.lsn}
}

// phase makes n random transactions, and the big ones batching is for:
// long runs of inserts (one-column key) and of deletes (composite key,
// then one-column key).
func (m *mdbModel) phase(n int, bigFrom int) []mdbTx {
	var out []mdbTx
	for i := range n {
		switch i {
		case n / 3:
			var cs []trail.Record
			for j := range 150 {
				cs = append(cs, m.insert(0, m.row(0, []trail.Value{{Text: strconv.Itoa(bigFrom + j)}})))
			}
			for j := range 70 {
				cs = append(cs, m.insert(1, m.row(1, []trail.Value{{Text: strconv.Itoa(bigFrom + j)}, {Text: "bulk"}})))
			}
			out = append(out, m.tx(cs))
		case 2 * n / 3:
			var cs []trail.Record
			for _, ti := range []int{1, 0} {
				for range 80 {
					if k, ok := m.existing(ti); ok {
						cs = append(cs, m.delete(ti, k))
					}
				}
			}
			out = append(out, m.tx(cs))
		}
		var cs []trail.Record
		for range 1 + m.rng.IntN(8) {
			cs = append(cs, m.change())
		}
		out = append(out, m.tx(cs))
	}
	return out
}

// rendered is every table's rows as text, sorted: what the target must
// hold.
func (m *mdbModel) rendered() [][]string {
	var out [][]string
	for ti := range mdbTables {
		var rows []string
		for _, r := range m.rows[ti] {
			rows = append(rows, renderRow(r))
		}
		slices.Sort(rows)
		out = append(out, rows)
	}
	return out
}

func renderRow(vals []trail.Value) string {
	var parts []string
	for _, v := range vals {
		if v.Null {
			parts = append(parts, "NULL")
		} else {
			parts = append(parts, strconv.Quote(v.Text))
		}
	}
	return strings.Join(parts, ",")
}

// writeTrail appends txs to the trail at path and returns each one's
// commit position.
func writeTrail(t *testing.T, path string, txs []mdbTx) []trail.Pos {
	t.Helper()
	w, err := trail.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var ends []trail.Pos
	for i, tx := range txs {
		now := time.Now().UnixNano()
		recs := append([]trail.Record{{Op: trail.OpBegin, LSN: tx.lsn - 0x10, XID: uint32(1000 + i), Time: now}}, tx.changes...)
		recs = append(recs, trail.Record{Op: trail.OpCommit, LSN: tx.lsn, XID: uint32(1000 + i), Time: now})
		var pos trail.Pos
		for j := range recs {
			if pos, err = w.Append(&recs[j]); err != nil {
				t.Fatal(err)
			}
		}
		ends = append(ends, pos)
	}
	if _, _, err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	return ends
}

// TestReplicatToMariaDB: a trail of inserts, updates (some changing the
// key), deletes, NULLs and awkward text in three tables (one with a
// composite key) applied to a real MariaDB by replicats statement by
// statement and batched, one source transaction at a time and grouped,
// and as two replicats split by key. Each configuration applies half the
// trail, stops, resumes while the other half is written, and runs once
// more with nothing to do: the tables equal the model of the trail, the
// checkpoint is where the trail ends, every change was applied exactly
// once, and batching took fewer round trips than statements.
func TestReplicatToMariaDB(t *testing.T) {
	t.Parallel()
	srv := startMariaDB(t)
	m := newMdbModel()
	phases := [][]mdbTx{m.phase(120, 2000)}
	want1 := m.rendered()
	phases = append(phases, m.phase(80, 3000))
	want2 := m.rendered()

	for _, tc := range []struct {
		name     string
		batch    bool
		groupOps int
		parts    int
	}{
		{"plain", false, 1, 1},
		{"plain_grouped", false, 1000, 1},
		{"batch", true, 1, 1},
		{"batch_grouped", true, 1000, 1},
		{"parts", true, 50, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			db := "rt_" + tc.name
			mustExec(t, srv.admin, "CREATE DATABASE "+mysqlIdent(db))
			for _, tb := range mdbTables {
				mustExec(t, srv.admin, "CREATE TABLE "+mysqlIdent(db)+"."+mysqlIdent(tb.name)+" "+tb.ddl+" ENGINE=InnoDB")
			}
			path := filepath.Join(t.TempDir(), "trail")
			var dials atomic.Int64
			cfgs := make([]ReplicatConfig, tc.parts)
			for i := range cfgs {
				cfgs[i] = ReplicatConfig{Engine: EngineMariaDB, Trail: path, DSN: srv.dsn(db), Name: fmt.Sprintf("%s#%d", tc.name, i),
					Batch: tc.batch, GroupOps: tc.groupOps, Parts: tc.parts, Part: i, SplitBy: "key",
					Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
						dials.Add(1)
						var d net.Dialer
						return d.DialContext(ctx, network, addr)
					}}
			}
			// Where each replicat's checkpoint may be: from the end of the
			// last transaction holding a change of its to the end of the
			// trail (with Parts, the transactions after its last change
			// move it only when they close a group of its).
			type ckRange struct {
				lo, hi trail.Pos
				lsn    map[trail.Pos]uint64
			}
			cks := make([]ckRange, tc.parts)
			for i := range cks {
				cks[i].lsn = map[trail.Pos]uint64{0: 0}
			}
			var ends []trail.Pos
			for phase, txs := range phases {
				// Phase 1 is in the trail before the replicats start; phase
				// 2 is written while they run, from their checkpoints.
				var reps []*replicatRun
				if phase == 0 {
					ends = append(ends, writeTrail(t, path, txs)...)
				}
				for i := range cfgs {
					reps = append(reps, runReplicat(ctx, cfgs[i]))
				}
				if phase == 1 {
					time.Sleep(50 * time.Millisecond)
					ends = append(ends, writeTrail(t, path, txs)...)
				}
				end := ends[len(ends)-1]
				first := len(ends) - len(txs)
				owned := make([]int64, tc.parts)
				for i := range cfgs {
					for j, tx := range txs {
						mine := 0
						for k := range tx.changes {
							if cfgs[i].owns(&tx.changes[k]) {
								mine++
							}
						}
						owned[i] += int64(mine)
						cks[i].lsn[ends[first+j]] = tx.lsn
						if mine > 0 {
							cks[i].lo = ends[first+j]
						}
					}
					cks[i].hi = end
				}
				for i, r := range reps {
					r.wait(t, end)
					r.stop(t)
					c := r.c
					if n := c.Records.Load(); n != owned[i] {
						t.Errorf("phase %d, %s: %d changes applied, want the %d of its own in this phase", phase+1, cfgs[i].Name, n, owned[i])
					}
					checkRoundTrips(t, fmt.Sprintf("phase %d, %s", phase+1, cfgs[i].Name), tc.batch, c)
				}
				want := want1
				if phase == 1 {
					want = want2
				}
				checkTables(t, srv.admin, db, want)
				for i := range cfgs {
					checkCheckpoint(t, srv.admin, db, cfgs[i].Name, cks[i].lo, cks[i].hi, cks[i].lsn)
				}
			}

			// Once more on the whole trail: nothing to do.
			var before []string
			for i := range cfgs {
				before = append(before, checkpointRow(t, srv.admin, db, cfgs[i].Name))
			}
			for i := range cfgs {
				r := runReplicat(ctx, cfgs[i])
				r.wait(t, ends[len(ends)-1])
				time.Sleep(100 * time.Millisecond) // time to misbehave
				r.stop(t)
				if n, s, rt := r.c.Records.Load(), r.c.Statements.Load(), r.c.RoundTrips.Load(); n != 0 || s != 0 || rt != 0 {
					t.Errorf("rerun of %s: %d changes, %d statements, %d round trips; want none", cfgs[i].Name, n, s, rt)
				}
				if got := checkpointRow(t, srv.admin, db, cfgs[i].Name); got != before[i] {
					t.Errorf("rerun of %s moved its checkpoint: %s, was %s", cfgs[i].Name, got, before[i])
				}
			}
			checkTables(t, srv.admin, db, want2)
			if dials.Load() == 0 {
				t.Error("the replicats never used their Dial")
			}
		})
	}

	t.Run("deadlock_retry", func(t *testing.T) {
		t.Parallel()
		testDeadlockRetry(t, srv)
	})

	// A failing transaction is rolled back whole, and the error names
	// the replicat and the table.
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprintf("error_batch_%v", batch), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			db := fmt.Sprintf("rt_error_%v", batch)
			mustExec(t, srv.admin, "CREATE DATABASE "+mysqlIdent(db), "CREATE TABLE "+mysqlIdent(db)+".acct "+mdbTables[0].ddl)
			path := filepath.Join(t.TempDir(), "trail")
			ok := trail.Record{Op: trail.OpInsert, Schema: "public", Table: "acct", Columns: mdbTables[0].cols, Key: []int{0},
				Values: []trail.Value{{Text: "1"}, {Text: "2.50"}, {Null: true}}}
			missing := trail.Record{Op: trail.OpInsert, Schema: "public", Table: "missing", Columns: []string{"id"}, Key: []int{0},
				Values: []trail.Value{{Text: "1"}}}
			writeTrail(t, path, []mdbTx{{changes: []trail.Record{ok, missing}, lsn: 0x2000}})
			name := fmt.Sprintf("err-%v", batch)
			var c ReplicatCounters
			err := Replicat(ctx, ReplicatConfig{Engine: EngineMariaDB, Trail: path, DSN: srv.dsn(db), Name: name, Batch: batch}, &c)
			var me *mysql.MySQLError
			if err == nil || !strings.Contains(err.Error(), "replicat "+name+":") || !strings.Contains(err.Error(), "`missing`") || !errors.As(err, &me) {
				t.Errorf("error %v: want one naming replicat %s and table `missing`, wrapping the server's", err, name)
			}
			checkTables(t, srv.admin, db, [][]string{nil})
			checkCheckpoint(t, srv.admin, db, name, 0, 0, map[trail.Pos]uint64{0: 0})
		})
	}
}

// testDeadlockRetry: a replicat chosen as a deadlock's victim applies its
// transaction again, once the other has committed: nothing lost, nothing
// twice.
func testDeadlockRetry(t *testing.T, srv *mariadbServer) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	q := mysqlIdent("rt_deadlock")
	mustExec(t, srv.admin, "CREATE DATABASE "+q, "CREATE TABLE "+q+".acct "+mdbTables[0].ddl,
		"INSERT INTO "+q+".acct VALUES (1, 0, 'a'), (2, 0, 'b')", "CREATE TABLE "+q+".heavy (id INT PRIMARY KEY)")
	upd := func(id string) trail.Record {
		return trail.Record{Op: trail.OpUpdate, Schema: "public", Table: "acct", Columns: mdbTables[0].cols, Key: []int{0},
			Values: []trail.Value{{Text: id}, {Text: "5.00"}, {Text: "replicat " + id}}}
	}
	path := filepath.Join(t.TempDir(), "trail")
	end := writeTrail(t, path, []mdbTx{{changes: []trail.Record{upd("2"), upd("1")}, lsn: 0x3000}})[0]

	// The other transaction locks row 1 and is the heavier (InnoDB rolls
	// back the lighter): the replicat, holding row 2, waits for row 1,
	// then the other asks for row 2.
	tx, err := srv.admin.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var vals []string
	for i := range 200 {
		vals = append(vals, fmt.Sprintf("(%d)", i))
	}
	for _, s := range []string{"INSERT INTO " + q + ".heavy VALUES " + strings.Join(vals, ", "), "UPDATE " + q + ".acct SET note = 'other 1' WHERE id = 1"} {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	r := runReplicat(ctx, ReplicatConfig{Engine: EngineMariaDB, Trail: path, DSN: srv.dsn("rt_deadlock"), Name: "deadlock", Batch: true})
	defer r.cancel()
	for waiting := 0; waiting == 0; {
		if err := srv.admin.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT'").Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		// Not faster: InnoDB refreshes INNODB_TRX only when it has not
		// been read for 100 ms.
		time.Sleep(150 * time.Millisecond)
	}
	if _, err := tx.ExecContext(ctx, "UPDATE "+q+".acct SET note = 'other 2' WHERE id = 2"); err != nil {
		t.Fatalf("the heavier transaction: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	r.wait(t, end)
	r.stop(t)
	if n := r.c.Retries.Load(); n != 1 {
		t.Errorf("%d retries, want 1", n)
	}
	want := []string{renderRow(upd("1").Values), renderRow(upd("2").Values)}
	checkTables(t, srv.admin, "rt_deadlock", [][]string{want})
	checkCheckpoint(t, srv.admin, "rt_deadlock", "deadlock", end, end, map[trail.Pos]uint64{end: 0x3000})
}

// replicatRun is a Replicat running on a goroutine.
type replicatRun struct {
	name   string
	c      *ReplicatCounters
	cancel context.CancelFunc
	done   chan error
}

func runReplicat(ctx context.Context, cfg ReplicatConfig) *replicatRun {
	ctx, cancel := context.WithCancel(ctx)
	r := &replicatRun{name: cfg.Name, c: new(ReplicatCounters), cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- Replicat(ctx, cfg, r.c) }()
	return r
}

// wait waits until the replicat has gone through the trail up to end.
func (r *replicatRun) wait(t *testing.T, end trail.Pos) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for trail.Pos(r.c.Bytes.Load()) != end {
		select {
		case err := <-r.done:
			r.done <- err
			t.Fatalf("%s ended before trail position %d (at %d): %v", r.name, end, r.c.Bytes.Load(), err)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			r.cancel()
			t.Fatalf("%s did not reach trail position %d within a minute (at %d)", r.name, end, r.c.Bytes.Load())
		}
	}
}

// stop cancels the replicat and wants it to end without error.
func (r *replicatRun) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("%s: %v", r.name, err)
		}
	case <-time.After(time.Minute):
		t.Fatalf("%s did not stop within a minute", r.name)
	}
}

// checkRoundTrips checks the PostgreSQL path's invariants: statement by
// statement, START TRANSACTION, each statement, the checkpoint and COMMIT
// are a round trip each; batched, a transaction is one round trip and
// multi-row statements take fewer statements than changes.
func checkRoundTrips(t *testing.T, what string, batch bool, c *ReplicatCounters) {
	t.Helper()
	rt, st, tx, n := c.RoundTrips.Load(), c.Statements.Load(), c.Syncs.Load(), c.Records.Load()
	if r := c.Retries.Load(); r > 0 {
		// A deadlock's victim was sent again: more round trips, by how
		// far it had gone.
		t.Logf("%s: %d transactions applied again after a deadlock: round trips not checked", what, r)
		if batch && st >= n || !batch && st != n {
			t.Errorf("%s: %d statements for %d changes", what, st, n)
		}
		return
	}
	if batch {
		if rt != tx || rt >= st || st >= n {
			t.Errorf("%s batched: %d round trips, %d statements, %d target transactions, %d changes; want round trips = transactions < statements < changes", what, rt, st, tx, n)
		}
	} else if rt != st+3*tx || st != n {
		t.Errorf("%s: %d round trips, %d statements, %d target transactions, %d changes; want round trips = statements + 3 per transaction, a statement per change", what, rt, st, tx, n)
	}
	t.Logf("%s: %d changes, %d statements, %d round trips, %d target transactions", what, n, st, rt, tx)
}

// checkTables compares every table of the test (the first len(want)) at
// the target with want, exactly.
func checkTables(t *testing.T, db *sql.DB, database string, want [][]string) {
	t.Helper()
	for ti := range want {
		q := "SELECT * FROM " + mysqlIdent(database) + "." + mysqlIdent(mdbTables[ti].name)
		rows, err := db.Query(q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		var got []string
		for rows.Next() {
			vals := make([]sql.NullString, len(mdbTables[ti].cols))
			ptrs := make([]any, len(vals))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			r := make([]trail.Value, len(vals))
			for i, v := range vals {
				r[i] = trail.Value{Null: !v.Valid, Text: v.String}
			}
			got = append(got, renderRow(r))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
		slices.Sort(got)
		if !slices.Equal(got, want[ti]) {
			var missing, extra []string
			for _, r := range want[ti] {
				if !slices.Contains(got, r) {
					missing = append(missing, r)
				}
			}
			for _, r := range got {
				if !slices.Contains(want[ti], r) {
					extra = append(extra, r)
				}
			}
			t.Errorf("%s.%s: %d rows, want %d; missing %.300q; unexpected %.300q", database, mdbTables[ti].name, len(got), len(want[ti]), missing, extra)
		}
	}
}

func checkpointRow(t *testing.T, db *sql.DB, database, name string) string {
	t.Helper()
	var pos int64
	var lsn uint64
	if err := db.QueryRow("SELECT pos, lsn FROM "+mysqlIdent(database)+"."+mysqlIdent(checkpointTable)+" WHERE name = ?", name).Scan(&pos, &lsn); err != nil {
		t.Fatalf("checkpoint of %s: %v", name, err)
	}
	return fmt.Sprintf("pos %d lsn %X", pos, lsn)
}

// checkCheckpoint wants name's checkpoint at a transaction's end from lo
// to hi, with that transaction's LSN.
func checkCheckpoint(t *testing.T, db *sql.DB, database, name string, lo, hi trail.Pos, lsns map[trail.Pos]uint64) {
	t.Helper()
	var pos int64
	var lsn uint64
	if err := db.QueryRow("SELECT pos, lsn FROM "+mysqlIdent(database)+"."+mysqlIdent(checkpointTable)+" WHERE name = ?", name).Scan(&pos, &lsn); err != nil {
		t.Fatalf("checkpoint of %s: %v", name, err)
	}
	want, isEnd := lsns[trail.Pos(pos)]
	if trail.Pos(pos) < lo || trail.Pos(pos) > hi || !isEnd || lsn != want {
		t.Errorf("checkpoint of %s: pos %d lsn %X; want a transaction's end in [%d, %d] and its LSN (%X)", name, pos, lsn, lo, hi, want)
	}
}

func mustExec(t *testing.T, db *sql.DB, stmts ...string) {
	t.Helper()
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}
