package netcheck

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// Per-probe timeout: a reply counts only if it comes back within
// probeTimeoutBase + 3 × the largest round trip seen before it (at most
// maxProbeTimeout).
const (
	probeTimeoutBase = 2 * time.Second
	maxProbeTimeout  = time.Minute
)

func probeTimeout(maxSeen time.Duration) time.Duration {
	return min(probeTimeoutBase+3*maxSeen, maxProbeTimeout)
}

// RTT sends n small UDP probes, one every interval, from ns to the server's
// echo at srv and measures their round trips on the monotonic clock. Lost
// and late probes (see probeTimeout) count as not received. Pick interval so
// that probes do not queue behind each other on slow links.
func RTT(ctx context.Context, ns Netns, srv netip.AddrPort, n int, interval time.Duration) (RTTResult, error) {
	res, err := rtt(ctx, ns, srv, n, interval)
	if err != nil {
		return RTTResult{}, fmt.Errorf("rtt probe to %s: %w", srv, err)
	}
	return res, nil
}

// rttState is shared between the sender and the receiving goroutine.
type rttState struct {
	mu       sync.Mutex
	rtt      []time.Duration // by sequence number; 0 = not (yet) received
	received int
	maxSeen  time.Duration
	err      error         // receive failure other than the final deadline
	changed  chan struct{} // closed and replaced on every accepted reply or failure
}

func rtt(ctx context.Context, ns Netns, srv netip.AddrPort, n int, interval time.Duration) (RTTResult, error) {
	if n < 1 {
		return RTTResult{}, fmt.Errorf("n = %d probes: want >= 1", n)
	}
	if interval < 0 {
		return RTTResult{}, fmt.Errorf("negative interval %s", interval)
	}
	if err := ctx.Err(); err != nil {
		return RTTResult{}, err
	}
	var c *net.UDPConn
	if err := ns.Do(func() error {
		var err error
		c, err = net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(srv))
		return err
	}); err != nil {
		return RTTResult{}, err
	}
	defer c.Close()
	stopWatch := watch(ctx, c)
	defer stopWatch()

	base := time.Now()
	nonce := rand.Uint64()
	st := &rttState{rtt: make([]time.Duration, n), changed: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		receiveEchoes(c, base, nonce, st)
	}()
	stopReceiver := func() {
		_ = c.SetReadDeadline(time.Now())
		<-done
	}

	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	p := make([]byte, echoLen)
	copy(p, udpMagic)
	p[4] = udpEcho
	binary.BigEndian.PutUint64(p[5:13], nonce)
	var lastSend time.Time
	for i := range n {
		if err := sleepUntil(ctx, timer, base.Add(time.Duration(i)*interval)); err != nil {
			stopReceiver()
			return RTTResult{}, err
		}
		st.mu.Lock()
		rerr := st.err
		st.mu.Unlock()
		if rerr != nil {
			stopReceiver()
			return RTTResult{}, rerr
		}
		binary.BigEndian.PutUint32(p[13:17], uint32(i))
		lastSend = time.Now()
		binary.BigEndian.PutUint64(p[17:25], uint64(lastSend.Sub(base)))
		if _, err := c.Write(p); err != nil {
			stopReceiver()
			if cerr := ctx.Err(); cerr != nil {
				return RTTResult{}, cerr
			}
			return RTTResult{}, fmt.Errorf("send probe %d: %w", i, err)
		}
	}

	// Wait for the stragglers: until every probe is back or the last one
	// timed out (the timeout grows as larger round trips are seen).
	for {
		st.mu.Lock()
		all, rerr, changed := st.received == n, st.err, st.changed
		deadline := lastSend.Add(probeTimeout(st.maxSeen))
		st.mu.Unlock()
		if all || rerr != nil || !time.Now().Before(deadline) {
			break
		}
		timer.Reset(time.Until(deadline))
		select {
		case <-timer.C:
		case <-changed:
			timer.Stop()
		case <-ctx.Done():
			timer.Stop()
		}
		if ctx.Err() != nil {
			break
		}
	}
	stopReceiver()
	if err := ctx.Err(); err != nil {
		return RTTResult{}, err
	}
	if st.err != nil {
		return RTTResult{}, st.err
	}

	res := RTTResult{Sent: n, Received: st.received}
	res.SamplesMs = make([]float64, 0, st.received)
	for _, d := range st.rtt {
		if d > 0 {
			res.SamplesMs = append(res.SamplesMs, float64(d)/1e6)
		}
	}
	res.MinMs, res.MeanMs, res.P50Ms, res.P99Ms, res.MaxMs = summarize(res.SamplesMs)
	return res, nil
}

// receiveEchoes reads replies until the connection's read deadline passes
// or reading fails, recording accepted round trips in st.
func receiveEchoes(c *net.UDPConn, base time.Time, nonce uint64, st *rttState) {
	buf := make([]byte, 2048)
	for {
		k, err := c.Read(buf)
		now := time.Since(base)
		if err != nil {
			if isTimeout(err) || errors.Is(err, net.ErrClosed) {
				return
			}
			st.mu.Lock()
			st.err = fmt.Errorf("receive: %w", err)
			close(st.changed)
			st.changed = make(chan struct{})
			st.mu.Unlock()
			return
		}
		p := buf[:k]
		if k != echoLen || string(p[:4]) != udpMagic || p[4] != udpEcho || binary.BigEndian.Uint64(p[5:13]) != nonce {
			continue
		}
		seq := int(binary.BigEndian.Uint32(p[13:17]))
		d := now - time.Duration(binary.BigEndian.Uint64(p[17:25]))
		st.mu.Lock()
		if seq < len(st.rtt) && st.rtt[seq] == 0 && d <= probeTimeout(st.maxSeen) {
			st.rtt[seq] = max(d, 1) // 0 means "not received"
			st.received++
			st.maxSeen = max(st.maxSeen, d)
			close(st.changed)
			st.changed = make(chan struct{})
		}
		st.mu.Unlock()
	}
}

// summarize returns min, mean, median, 99th percentile and max of xs
// (percentiles interpolate linearly between closest ranks); all 0 for none.
func summarize(xs []float64) (minV, mean, p50, p99, maxV float64) {
	if len(xs) == 0 {
		return 0, 0, 0, 0, 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	var sum float64
	for _, x := range s {
		sum += x
	}
	return s[0], sum / float64(len(s)), percentile(s, 0.50), percentile(s, 0.99), s[len(s)-1]
}

// percentile of sorted s, q in [0,1], linear between closest ranks.
func percentile(s []float64, q float64) float64 {
	pos := q * float64(len(s)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(s)-1)
	return s[lo] + (s[hi]-s[lo])*(pos-float64(lo))
}
