package netcheck

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"net"
	"net/netip"
	"time"
)

// After the last datagram is sent, Loss polls the server's count until all
// have arrived or the count has not changed for drainQuiet (plus twice the
// slowest poll round trip); it never waits longer than drainLimit.
const (
	drainQuiet        = time.Second
	drainPollInterval = 50 * time.Millisecond
	drainLimit        = 30 * time.Second
)

// Loss sends n UDP datagrams with size bytes of payload (MinLossSize to
// MaxLossSize; IP and UDP headers come on top) at pps packets per second,
// one way from ns to the server at srv, which counts them by sequence
// number. Datagrams that arrive after the drain period count as lost.
func Loss(ctx context.Context, ns Netns, srv netip.AddrPort, n, size int, pps float64) (LossResult, error) {
	res, err := loss(ctx, ns, srv, n, size, pps)
	if err != nil {
		return LossResult{}, fmt.Errorf("loss to %s: %w", srv, err)
	}
	return res, nil
}

func checkLoss(n, size int, pps float64) error {
	switch {
	case n < 1 || n > MaxLossPackets:
		return fmt.Errorf("n = %d packets: want 1..%d", n, MaxLossPackets)
	case size < MinLossSize || size > MaxLossSize:
		return fmt.Errorf("size = %d bytes: want %d..%d", size, MinLossSize, MaxLossSize)
	case !(pps > 0) || math.IsInf(pps, 0):
		return fmt.Errorf("rate %v packets/s: want > 0", pps)
	case sendDuration(n, pps) > maxWindow:
		return fmt.Errorf("%d packets at %v packets/s take longer than %s", n, pps, maxWindow)
	}
	return nil
}

func sendDuration(n int, pps float64) time.Duration {
	return time.Duration(float64(n) / pps * float64(time.Second))
}

func loss(ctx context.Context, ns Netns, srv netip.AddrPort, n, size int, pps float64) (LossResult, error) {
	if err := checkLoss(n, size, pps); err != nil {
		return LossResult{}, err
	}
	b := newBound(ctx, setupTimeout+sendDuration(n, pps)+drainLimit+sessionSlack)

	req := request(opLoss)
	req = binary.BigEndian.AppendUint32(req, uint32(n))
	req = binary.BigEndian.AppendUint32(req, uint32(size))
	req = binary.BigEndian.AppendUint64(req, math.Float64bits(pps))
	ctrl, reply, err := openSession(b, ns, srv, req, 8)
	if err != nil {
		return LossResult{}, err
	}
	defer ctrl.Close()
	var udp *net.UDPConn
	if err := ns.Do(func() error {
		var err error
		udp, err = net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(srv))
		return err
	}); err != nil {
		return LossResult{}, err
	}
	defer udp.Close()
	stop := watch(ctx, ctrl, udp)
	defer stop()
	if err := b.setDeadline(ctrl, b.hard); err != nil {
		return LossResult{}, err
	}
	if err := b.setDeadline(udp, b.hard); err != nil {
		return LossResult{}, err
	}

	p := make([]byte, size)
	copy(p, udpMagic)
	p[4] = udpLoss
	copy(p[5:13], reply)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	start := time.Now()
	for i := range n {
		due := start.Add(time.Duration(float64(i) / pps * float64(time.Second)))
		if err := sleepUntil(ctx, timer, due); err != nil {
			return LossResult{}, err
		}
		binary.BigEndian.PutUint32(p[13:17], uint32(i))
		if _, err := udp.Write(p); err != nil {
			return LossResult{}, b.err(fmt.Errorf("send datagram %d: %w", i, err))
		}
	}

	sent := time.Since(start)
	if err := drain(b, ctrl, timer, n); err != nil {
		return LossResult{}, err
	}
	if _, err := ctrl.Write([]byte{cmdReport}); err != nil {
		return LossResult{}, b.err(fmt.Errorf("ask for report: %w", err))
	}
	bits, err := readReply(ctrl, (n+7)/8)
	if err != nil {
		return LossResult{}, b.err(fmt.Errorf("read report: %w", err))
	}
	res := lossFromBitmap(bits, n)
	res.SendSeconds = sent.Seconds()
	return res, nil
}

// drain waits for datagrams still on their way (see drainQuiet).
func drain(b bound, ctrl net.Conn, timer *time.Timer, n int) error {
	begin := time.Now()
	last, lastChange := -1, begin
	var slowestPoll time.Duration
	for {
		t := time.Now()
		if _, err := ctrl.Write([]byte{cmdPoll}); err != nil {
			return b.err(fmt.Errorf("poll: %w", err))
		}
		m, err := readReply(ctrl, 4)
		if err != nil {
			return b.err(fmt.Errorf("poll: %w", err))
		}
		now := time.Now()
		slowestPoll = max(slowestPoll, now.Sub(t))
		got := int(binary.BigEndian.Uint32(m))
		switch {
		case got >= n:
			return nil
		case got != last:
			last, lastChange = got, now
		case now.Sub(lastChange) >= drainQuiet+2*slowestPoll:
			return nil
		}
		if now.Sub(begin) >= drainLimit {
			return nil
		}
		if err := sleepUntil(b.ctx, timer, now.Add(drainPollInterval)); err != nil {
			return err
		}
	}
}

// lossFromBitmap summarizes which of n sequence numbers arrived (bit i of
// bits set: number i arrived).
func lossFromBitmap(bits []byte, n int) LossResult {
	r := LossResult{Sent: n}
	run, lost := 0, 0
	endRun := func() {
		if run > 0 {
			r.Bursts++
			r.MaxBurstPackets = max(r.MaxBurstPackets, run)
			run = 0
		}
	}
	for i := range n {
		if bits[i/8]&(1<<(i%8)) != 0 {
			r.Received++
			endRun()
			continue
		}
		lost++
		run++
	}
	endRun()
	r.LossFraction = float64(lost) / float64(n)
	if r.Bursts > 0 {
		r.MeanBurstPackets = float64(lost) / float64(r.Bursts)
	}
	return r
}
