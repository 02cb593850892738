package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"sync"
	"time"

	"replab/internal/clock"
)

// Pings: a burst at connect, so that an estimate exists before Watch, then
// one every pingEvery.
const (
	burstPings = 8
	burstGap   = 10 * time.Millisecond
	pingEvery  = 200 * time.Millisecond
)

// Client is the driver's connection to one agent: lagprobe.TimedQuerier
// and engine.LagReader.
type Client struct {
	addr string
	nc   net.Conn
	enc  *json.Encoder
	wmu  sync.Mutex // serialises writes

	obs  chan msg      // obs, beat and poll_error, in order
	done chan struct{} // closed when the reader stops
	rerr error         // why it stopped; read after done

	mu       sync.Mutex
	est      estimator
	maxBound int64
	offset   int64 // the offset of the last observation converted
	stop     chan struct{}
	once     sync.Once
}

// Dial connects to the agent at addr, presents the token and waits for a
// first clock-offset estimate.
func Dial(ctx context.Context, addr, token string) (*Client, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("agent at %s: %w (is replab agent running there, and may this host reach it?)", addr, err)
	}
	c := &Client{addr: addr, nc: nc, enc: json.NewEncoder(nc), obs: make(chan msg, 4096), done: make(chan struct{}), stop: make(chan struct{})}
	rd := bufio.NewReader(nc)
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	} else {
		_ = nc.SetDeadline(time.Now().Add(15 * time.Second))
	}
	if err := c.send(msg{Type: "hello", Version: Version, Token: token}); err != nil {
		nc.Close()
		return nil, fmt.Errorf("agent at %s: %w", addr, err)
	}
	var w msg
	if err := readMsg(rd, &w); err != nil {
		nc.Close()
		return nil, fmt.Errorf("agent at %s: no welcome: %w", addr, err)
	}
	switch {
	case w.Type == "error" && w.Error == "token refused":
		nc.Close()
		return nil, fmt.Errorf("agent at %s refused the token (check [target] agent_token_file or REPLAB_AGENT_TOKEN against the agent's --token-file)", addr)
	case w.Type != "welcome":
		nc.Close()
		return nil, fmt.Errorf("agent at %s: %s", addr, w.Error)
	}
	_ = nc.SetDeadline(time.Time{})
	go c.read(rd)
	go c.ping()
	// The burst's first answers give the first estimate.
	for {
		if _, _, ok := c.Offset(); ok {
			return c, nil
		}
		select {
		case <-c.done:
			c.Close()
			return nil, fmt.Errorf("agent at %s: %w", addr, c.rerr)
		case <-ctx.Done():
			c.Close()
			return nil, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (c *Client) send(m msg) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if m.Type == "ping" {
		m.T1 = clock.Now() // as late as can be
	}
	return c.enc.Encode(m)
}

// read dispatches the agent's messages until the connection ends.
func (c *Client) read(rd *bufio.Reader) {
	defer close(c.done)
	for {
		var m msg
		if err := readMsg(rd, &m); err != nil {
			c.rerr = fmt.Errorf("connection lost: %w", err)
			return
		}
		switch m.Type {
		case "pong":
			t4 := clock.Now()
			c.mu.Lock()
			c.est.add(m.T1, m.T2, m.T3, t4)
			c.mu.Unlock()
		case "obs", "beat", "poll_error":
			select {
			case c.obs <- m:
			case <-c.stop:
				return
			}
		case "error":
			c.rerr = fmt.Errorf("the agent says: %s", m.Error)
			return
		}
	}
}

// ping keeps the offset estimate fresh.
func (c *Client) ping() {
	for i := 0; ; i++ {
		gap := pingEvery
		if i < burstPings {
			gap = burstGap
		}
		select {
		case <-c.stop:
			return
		case <-c.done:
			return
		case <-time.After(gap):
		}
		if c.send(msg{Type: "ping"}) != nil {
			return
		}
	}
}

// Watch asks the agent to poll table (replab_lag, schema-qualified or
// not) every interval.
func (c *Client) Watch(ctx context.Context, table string, interval time.Duration) error {
	if !tableRE.MatchString(table) {
		return fmt.Errorf("agent at %s: %q is not replab's lag table", c.addr, table)
	}
	return c.send(msg{Type: "watch", Table: table, IntervalNs: int64(interval)})
}

// TimedPositions implements lagprobe.TimedQuerier: the agent's next
// observation, its times converted to this host's clock.
func (c *Client) TimedPositions(ctx context.Context, dst []int64) (start, end int64, err error) {
	var m msg
	select {
	case m = <-c.obs:
	case <-c.done:
		select {
		case m = <-c.obs: // what arrived before the end
		default:
			return 0, 0, fmt.Errorf("agent at %s: %w", c.addr, c.rerr)
		}
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	}
	if m.Type == "poll_error" {
		return 0, 0, fmt.Errorf("agent at %s: poll: %s", c.addr, m.Error)
	}
	c.mu.Lock()
	off, bound, _ := c.est.estimate(clock.Now())
	c.maxBound = max(c.maxBound, bound)
	c.offset = off
	c.mu.Unlock()
	for _, p := range m.Pos {
		if w := p[0]; w >= 0 && w < int64(len(dst)) {
			dst[w] = p[1]
		}
	}
	return m.Start - off, max(m.End-off, m.Start-off), nil
}

// Positions implements lagprobe.Querier.
func (c *Client) Positions(ctx context.Context, dst []int64) error {
	_, _, err := c.TimedPositions(ctx, dst)
	return err
}

// Offset is the current estimate of the agent's clock minus this host's,
// and its bound.
func (c *Client) Offset() (offset, bound time.Duration, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	o, b, ok := c.est.estimate(clock.Now())
	return time.Duration(o), time.Duration(b), ok
}

// MaxBound is the largest bound an observation handed out so far carried.
func (c *Client) MaxBound() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Duration(c.maxBound)
}

// LastOffset is the offset the last observation was converted with.
func (c *Client) LastOffset() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Duration(c.offset)
}

// Close ends the connection; the agent stops polling.
func (c *Client) Close() error {
	c.once.Do(func() {
		close(c.stop)
		c.nc.Close()
		<-c.done
	})
	return nil
}
