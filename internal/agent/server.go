// Package agent is `replab agent`: a lag watcher that runs on a replica's
// host and streams what it sees to the driver, stamped with its own clock,
// and the driver's client of it, which estimates the offset between the
// two clocks over the same connection (estimate.go). The agent runs one
// query, replab's lag probe's, on a table named replab_lag; it answers
// only a driver that presents its token.
//
// The protocol (docs/agent.md) is JSON, one message per line, over TCP.
package agent

import (
	"bufio"
	"context"
	"crypto/subtle"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"sync"
	"time"

	"replab/internal/clock"
)

// Version is the protocol's version; hello and welcome carry it.
const Version = 1

// MinTokenBytes is the shortest token an agent accepts.
const MinTokenBytes = 16

// heartbeat is the longest an agent stays silent while it watches.
const heartbeat = 100 * time.Millisecond

// refuseDelay slows down token guessing.
const refuseDelay = time.Second

// tableRE is what an agent polls: replab_lag, in a schema or not.
var tableRE = regexp.MustCompile(`^([a-z_][a-z0-9_]{0,62}\.)?replab_lag$`)

// msg is every message, both ways; Type says which fields mean something.
type msg struct {
	Type    string `json:"type"` // hello, welcome, error, ping, pong, watch, obs, beat, poll_error
	Version int    `json:"version,omitempty"`
	Token   string `json:"token,omitempty"`
	Error   string `json:"error,omitempty"`
	// ping/pong: the client's t1, the agent's t2 (ping in) and t3 (pong out).
	T1 int64 `json:"t1,omitempty"`
	T2 int64 `json:"t2,omitempty"`
	T3 int64 `json:"t3,omitempty"`
	// watch
	Table      string `json:"table,omitempty"`
	IntervalNs int64  `json:"interval_ns,omitempty"`
	// obs, beat: a poll's start and end on the agent's clock, and the
	// writers whose position changed since the previous obs, as
	// [writer, seq] pairs.
	Start int64      `json:"start,omitempty"`
	End   int64      `json:"end,omitempty"`
	Pos   [][2]int64 `json:"pos,omitempty"`
}

// ServerConfig sets up an agent.
type ServerConfig struct {
	Listen string // host:port
	Token  string // what the driver must present (≥ MinTokenBytes)
	// Open opens a pool to the local replica: its engine's
	// (engine.Attacher.Opener), made from the connection string whose
	// password, if any, is never logged.
	Open func() (*sql.DB, error)
	// ClockOffset is added to every time the agent reports: a testing aid
	// that makes its host's clock look that far off.
	ClockOffset time.Duration
	Log         io.Writer
}

// Server is a listening agent.
type Server struct {
	cfg  ServerConfig
	ln   net.Listener
	open func() (*sql.DB, error)
	wg   sync.WaitGroup
}

// NewServer checks cfg and listens.
func NewServer(cfg ServerConfig) (*Server, error) {
	if len(cfg.Token) < MinTokenBytes {
		return nil, fmt.Errorf("the token must be at least %d bytes (it is %d): e.g. head -c 24 /dev/urandom | base64 > agent.token", MinTokenBytes, len(cfg.Token))
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.Open == nil {
		return nil, errors.New("no way to reach the replica: ServerConfig.Open is nil")
	}
	s := &Server{cfg: cfg, open: cfg.Open}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	s.ln = ln
	return s, nil
}

// Addr is where the agent listens.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// now is the agent's clock: the host's, plus the configured offset.
func (s *Server) now() int64 { return clock.Now() + int64(s.cfg.ClockOffset) }

// Serve answers drivers until ctx ends; then it closes every connection
// and returns nil.
func (s *Server) Serve(ctx context.Context) error {
	go func() {
		<-ctx.Done()
		s.ln.Close()
	}()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			s.wg.Wait()
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			go func() {
				<-cctx.Done()
				c.Close()
			}()
			if err := s.serve(cctx, c); err != nil && cctx.Err() == nil {
				fmt.Fprintf(s.cfg.Log, "agent: %s: %v\n", c.RemoteAddr(), err)
			}
		}()
	}
}

// conn is one driver's connection; send serialises writes.
type conn struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (c *conn) send(m msg, stamp func() int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if stamp != nil {
		m.T3 = stamp() // as late as can be: just before the write
	}
	return c.enc.Encode(m)
}

func (s *Server) serve(ctx context.Context, nc net.Conn) error {
	rd := bufio.NewReader(nc)
	c := &conn{enc: json.NewEncoder(nc)}
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	var hello msg
	if err := readMsg(rd, &hello); err != nil {
		return fmt.Errorf("hello: %w", err)
	}
	if hello.Type != "hello" || subtle.ConstantTimeCompare([]byte(hello.Token), []byte(s.cfg.Token)) != 1 {
		time.Sleep(refuseDelay)
		_ = c.send(msg{Type: "error", Error: "token refused"}, nil)
		return errors.New("refused a wrong token")
	}
	if hello.Version != Version {
		_ = c.send(msg{Type: "error", Error: fmt.Sprintf("protocol version %d; this agent speaks %d: run the same replab version on both hosts", hello.Version, Version)}, nil)
		return fmt.Errorf("protocol version %d refused", hello.Version)
	}
	_ = nc.SetReadDeadline(time.Time{})
	if err := c.send(msg{Type: "welcome", Version: Version}, nil); err != nil {
		return err
	}
	fmt.Fprintf(s.cfg.Log, "agent: driver %s connected\n", nc.RemoteAddr())
	var watching sync.Once
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		var m msg
		if err := readMsg(rd, &m); err != nil {
			if errors.Is(err, io.EOF) || ctx.Err() != nil {
				return nil
			}
			return err
		}
		switch m.Type {
		case "ping":
			t2 := s.now()
			if err := c.send(msg{Type: "pong", T1: m.T1, T2: t2}, s.now); err != nil {
				return err
			}
		case "watch":
			if !tableRE.MatchString(m.Table) {
				_ = c.send(msg{Type: "error", Error: fmt.Sprintf("table %q refused: an agent polls replab_lag only", m.Table)}, nil)
				return fmt.Errorf("refused to watch table %q", m.Table)
			}
			watching.Do(func() {
				wg.Add(1)
				go func() {
					defer wg.Done()
					s.watch(ctx, c, m.Table, time.Duration(max(m.IntervalNs, int64(100*time.Microsecond))))
				}()
			})
		default:
			return fmt.Errorf("unexpected message %q", m.Type)
		}
	}
}

// readMsg reads one line and decodes it; lines are bounded.
func readMsg(rd *bufio.Reader, m *msg) error {
	line, err := rd.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return errors.New("message too long")
		}
		return err
	}
	return json.Unmarshal(line, m)
}

// watch polls the table every interval until ctx ends, sending what
// changed (obs), a beat when nothing did for a while, or the poll's error.
func (s *Server) watch(ctx context.Context, c *conn, table string, interval time.Duration) {
	defer clock.LockThread(-10)()
	sleeper := clock.NewSleeper()
	q := "SELECT writer, seq FROM " + table
	var db *sql.DB
	var stmt *sql.Stmt
	closeDB := func() {
		if stmt != nil {
			stmt.Close()
			stmt = nil
		}
		if db != nil {
			db.Close()
			db = nil
		}
	}
	defer closeDB()
	last := map[int64]int64{}
	lastSent := int64(0)
	next := clock.Now()
	for ctx.Err() == nil {
		if stmt == nil {
			var err error
			if db, err = s.open(); err == nil {
				db.SetMaxOpenConns(1)
				stmt, err = db.PrepareContext(ctx, q)
			}
			if err != nil {
				closeDB()
				if c.send(msg{Type: "poll_error", Error: err.Error()}, nil) != nil {
					return
				}
				next = clock.Now() + int64(time.Second) // back off
				sleeper.UntilCtx(ctx, next)
				continue
			}
		}
		start := s.now()
		changed, err := poll(ctx, stmt, last)
		end := s.now()
		switch {
		case err != nil && ctx.Err() == nil:
			closeDB()
			if c.send(msg{Type: "poll_error", Error: err.Error()}, nil) != nil {
				return
			}
		case len(changed) > 0:
			if c.send(msg{Type: "obs", Start: start, End: end, Pos: changed}, nil) != nil {
				return
			}
			lastSent = end
		case end-lastSent >= int64(heartbeat):
			if c.send(msg{Type: "beat", Start: start, End: end}, nil) != nil {
				return
			}
			lastSent = end
		}
		next += int64(interval)
		if now := clock.Now(); next < now {
			next = now
		}
		sleeper.UntilCtx(ctx, next)
	}
}

// poll reads every writer's position and returns those that changed.
func poll(ctx context.Context, stmt *sql.Stmt, last map[int64]int64) ([][2]int64, error) {
	rows, err := stmt.QueryContext(ctx)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var changed [][2]int64
	for rows.Next() {
		var w, seq int64
		if err := rows.Scan(&w, &seq); err != nil {
			return nil, err
		}
		if old, ok := last[w]; !ok || old != seq {
			last[w] = seq
			changed = append(changed, [2]int64{w, seq})
		}
	}
	return changed, rows.Err()
}
