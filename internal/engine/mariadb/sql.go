package mariadb

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"replab/internal/engine"
	"replab/internal/enginekit"
)

// Dialect implements engine.SQL.
func (c *cluster) Dialect() engine.Dialect { return engine.MySQL }

// Open implements engine.SQL: a go-sql-driver/mysql pool whose connections
// are dialled from inside fromSite (no global dialer registration).
func (c *cluster) Open(ctx context.Context, name, fromSite string) (*sql.DB, error) {
	cfg, err := c.clientConfig(name, fromSite)
	if err != nil {
		return nil, err
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(conn), nil
}

func (c *cluster) clientConfig(name, fromSite string) (*mysql.Config, error) {
	n := c.byName[name]
	if n == nil {
		return nil, fmt.Errorf("no node %q", name)
	}
	site := c.lab.Site(fromSite)
	if site == nil {
		return nil, fmt.Errorf("no site %q", fromSite)
	}
	cfg := n.tcpConfig()
	cfg.DialFunc = c.trackDial(site.DialContext)
	return cfg, nil
}

// Loader implements engine.BulkLoader: LOAD DATA LOCAL INFILE streamed
// from the rows, over one connection from fromSite.
func (c *cluster) Loader(ctx context.Context, node, fromSite string) (engine.Loader, error) {
	cfg, err := c.clientConfig(node, fromSite)
	if err != nil {
		return nil, err
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(1)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("connect to %s from %s: %w", node, fromSite, err)
	}
	l := &infileLoader{db: db}
	if c.plan.replication == Galera {
		// One write-set per statement, certified by every member across the
		// WAN: a whole table in one would be a write-set of hundreds of MB
		// (measured: the loading node left the primary component).
		l.chunk = galeraLoadChunk
	}
	return l, nil
}

// galeraLoadChunk is how many rows one LOAD DATA statement (one write-set)
// carries in a Galera cluster.
const galeraLoadChunk = 5000

// infileLoader is MariaDB's bulk path.
type infileLoader struct {
	db    *sql.DB
	chunk int64 // rows per statement; 0: all in one
}

// readerSeq makes reader handler names unique: the driver keeps its
// handlers in one process-wide table.
var readerSeq atomic.Int64

// Copy implements engine.Loader: the rows go out as tab-separated text
// through a reader handler registered under a name of its own for the
// length of the statement.
func (l *infileLoader) Copy(ctx context.Context, table string, columns []string, rows engine.RowSource) (int64, error) {
	if l.chunk <= 0 {
		return l.copyOne(ctx, table, columns, rows)
	}
	var total int64
	for {
		part := &chunkRows{RowSource: rows, left: l.chunk}
		n, err := l.copyOne(ctx, table, columns, part)
		total += n
		if err != nil || part.ended {
			return total, err
		}
	}
}

// chunkRows yields at most left rows of a source; ended says the source
// has no more.
type chunkRows struct {
	engine.RowSource
	left  int64
	ended bool
}

func (c *chunkRows) Next() bool {
	if c.left <= 0 {
		return false
	}
	c.left--
	if !c.RowSource.Next() {
		c.ended = true
		return false
	}
	return true
}

// copyOne loads rows with one LOAD DATA statement.
func (l *infileLoader) copyOne(ctx context.Context, table string, columns []string, rows engine.RowSource) (int64, error) {
	name := fmt.Sprintf("replab-%d-%d", time.Now().UnixNano(), readerSeq.Add(1))
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeRows(pw, rows)) }()
	mysql.RegisterReaderHandler(name, func() io.Reader { return pr })
	defer mysql.DeregisterReaderHandler(name)
	defer pr.Close() // stops the writer if the statement fails early
	cols := make([]string, len(columns))
	for i, c := range columns {
		cols[i] = ident(c)
	}
	// CHARACTER SET binary: the bytes go in as written (varbinary keys).
	q := fmt.Sprintf(`LOAD DATA LOCAL INFILE 'Reader::%s' INTO TABLE %s CHARACTER SET binary
		FIELDS TERMINATED BY '\t' ESCAPED BY '\\' LINES TERMINATED BY '\n' (%s)`, name, ident(table), strings.Join(cols, ", "))
	res, err := l.db.ExecContext(ctx, q)
	if err != nil {
		return 0, fmt.Errorf("load data into %s: %w", table, err)
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	n, _ := res.RowsAffected()
	return n, nil
}

// writeRows writes rows as LOAD DATA's default text format.
func writeRows(w io.Writer, rows engine.RowSource) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	var buf []byte
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return err
		}
		buf = buf[:0]
		for i, v := range vals {
			if i > 0 {
				buf = append(buf, '\t')
			}
			buf = appendField(buf, v)
		}
		buf = append(buf, '\n')
		if _, err := bw.Write(buf); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return bw.Flush()
}

// appendField writes one value, escaped: \N is NULL.
func appendField(b []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(b, `\N`...)
	case int64:
		return strconv.AppendInt(b, x, 10)
	case int:
		return strconv.AppendInt(b, int64(x), 10)
	case int32:
		return strconv.AppendInt(b, int64(x), 10)
	case float64:
		return strconv.AppendFloat(b, x, 'g', -1, 64)
	case bool:
		if x {
			return append(b, '1')
		}
		return append(b, '0')
	case time.Time:
		return x.UTC().AppendFormat(b, "2006-01-02 15:04:05.999999")
	case []byte:
		return appendEscaped(b, x)
	case string:
		return appendEscaped(b, []byte(x))
	}
	return appendEscaped(b, fmt.Append(nil, v))
}

func appendEscaped(b, s []byte) []byte {
	for _, c := range s {
		switch c {
		case '\\':
			b = append(b, '\\', '\\')
		case '\t':
			b = append(b, '\\', 't')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case 0:
			b = append(b, '\\', '0')
		default:
			b = append(b, c)
		}
	}
	return b
}

// ident quotes a name (possibly db.table) with backticks.
func ident(name string) string {
	parts := strings.Split(name, ".")
	for i, p := range parts {
		parts[i] = "`" + strings.ReplaceAll(p, "`", "``") + "`"
	}
	return strings.Join(parts, ".")
}

// Exec implements engine.Loader.
func (l *infileLoader) Exec(ctx context.Context, q string) error {
	if _, err := l.db.ExecContext(ctx, q); err != nil {
		return fmt.Errorf("%s: %w", enginekit.FirstWords(q), err)
	}
	return nil
}

// Close implements engine.Loader.
func (l *infileLoader) Close() error { return l.db.Close() }

// LagReader implements engine.LagReaders: replab_lag read over one
// connection from the node's own site, speaking the protocol itself on a
// blocking socket (wireReader), and in a Galera cluster with
// wsrep_sync_wait = 0 whatever the scheme sets: a causal read first waits
// for the cluster (a round trip across the WAN) and would time that wait,
// not what the node shows now.
func (c *cluster) LagReader(ctx context.Context, node string) (engine.LagReader, error) {
	n := c.byName[node]
	if n == nil {
		return nil, fmt.Errorf("no node %q", node)
	}
	site := c.lab.Site(n.Site)
	if site == nil {
		return nil, fmt.Errorf("no site %q", n.Site)
	}
	r := &wireReader{dial: site.DialContext, addr: n.addr.String(), user: User, pw: c.password, db: Database,
		syncWait0: c.plan.replication == Galera, fd: -1}
	if err := r.connect(ctx); err != nil {
		return nil, err
	}
	return r, nil
}
