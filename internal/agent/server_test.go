package agent

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

const testToken = "0123456789abcdef-test"

// startServer runs an agent on a free local port; its replica is never
// reached by these tests (they stop before a poll).
func startServer(t *testing.T, offset time.Duration) *Server {
	t.Helper()
	srv, err := NewServer(ServerConfig{Listen: "127.0.0.1:0", Token: testToken, Open: neverOpened, ClockOffset: offset})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return srv
}

func TestWrongTokenRefused(t *testing.T) {
	srv := startServer(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := Dial(ctx, srv.Addr().String(), "not-the-token-at-all")
	if err == nil || !strings.Contains(err.Error(), "refused the token") {
		t.Fatalf("Dial with a wrong token: %v, want a refusal", err)
	}
}

func TestOffsetEstimatedWithinBound(t *testing.T) {
	const skew = 300 * time.Millisecond
	srv := startServer(t, skew)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Dial(ctx, srv.Addr().String(), testToken)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	off, bound, ok := c.Offset()
	if !ok {
		t.Fatal("no estimate after Dial")
	}
	// Both ends read this machine's monotonic clock: the agent's is ahead
	// by exactly skew.
	if d := off - skew; d > bound || -d > bound {
		t.Errorf("offset %v ± %v; the true %v is outside", off, bound, skew)
	}
}

// TestOnlyTheLagTableIsPolled talks to the agent directly: a client that
// skipped its own check still cannot make the agent run another query.
func TestOnlyTheLagTableIsPolled(t *testing.T) {
	srv := startServer(t, 0)
	nc, err := net.DialTimeout("tcp", srv.Addr().String(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(20 * time.Second))
	enc, rd := json.NewEncoder(nc), bufio.NewReader(nc)
	if err := enc.Encode(msg{Type: "hello", Version: Version, Token: testToken}); err != nil {
		t.Fatal(err)
	}
	var m msg
	if err := readMsg(rd, &m); err != nil || m.Type != "welcome" {
		t.Fatalf("welcome: %+v, %v", m, err)
	}
	if err := enc.Encode(msg{Type: "watch", Table: "pg_authid; --", IntervalNs: 1e6}); err != nil {
		t.Fatal(err)
	}
	if err := readMsg(rd, &m); err != nil || m.Type != "error" || !strings.Contains(m.Error, "replab_lag only") {
		t.Fatalf("watch of another table: %+v, %v; want an error", m, err)
	}
	if err := readMsg(rd, &m); err == nil {
		t.Errorf("the connection stayed open after a refused table: %+v", m)
	}
	for _, ok := range []string{"replab_lag", "replab.replab_lag", "replab_t.replab_lag"} {
		if !tableRE.MatchString(ok) {
			t.Errorf("%q refused", ok)
		}
	}
	for _, bad := range []string{"pg_authid", "x.replab_lag2", "replab_lag; DROP TABLE x", "a.b.replab_lag", `"x".replab_lag`} {
		if tableRE.MatchString(bad) {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestShortTokenRefused(t *testing.T) {
	if _, err := NewServer(ServerConfig{Listen: "127.0.0.1:0", Token: "short", Open: neverOpened}); err == nil || !strings.Contains(err.Error(), "at least 16 bytes") {
		t.Errorf("a 5-byte token: %v", err)
	}
	if _, err := NewServer(ServerConfig{Listen: "127.0.0.1:0", Token: testToken}); err == nil || !strings.Contains(err.Error(), "no way to reach the replica") {
		t.Errorf("no Open: %v", err)
	}
}

// neverOpened is the replica of agents these tests stop before a poll.
func neverOpened() (*sql.DB, error) {
	return nil, errors.New("the tests reach no replica")
}
