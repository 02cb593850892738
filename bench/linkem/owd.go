package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"replab/internal/clock"
	"replab/internal/netcheck"
)

// owdPayload is the UDP payload of a one-way probe: sequence number and
// send time (ns since the prober's base on the monotonic clock).
const owdPayload = 16

// owdPacketBytes is a probe's IP packet: payload + UDP + IPv4 headers.
const owdPacketBytes = owdPayload + 8 + 20

// owdTail is how long the prober waits for the last probes after sending.
const owdTail = time.Second

// owdResult is a one-way delay measurement.
type owdResult struct {
	Sent      int
	SamplesMs []float64   // received probes, in sending order: user-space receive − send
	Probes    []owdSample // the same probes, with every timestamp taken
}

// owdSample is one probe's way, in clock.Now ns (0: not taken).
type owdSample struct {
	sent   int64    // before the sender's write
	hop    hopTimes // inside the emulator (probeTap), when followed
	kernel int64    // the receiving kernel's timestamp (SO_TIMESTAMPNS)
	user   int64    // when the receiving goroutine had it
}

// oneWay sends n small UDP probes, one every interval, from one namespace
// to a socket in another and measures each one's one-way delay. Sender and
// receiver are in this process and share its monotonic clock, so a
// one-way delay needs no clock synchronisation: unlike a round trip it can
// measure one direction of a link alone. The receiver also takes the
// kernel's receive timestamp, and tap (nil: none) follows the probes
// through the emulator, so each delay splits into where its time went.
func oneWay(ctx context.Context, from netcheck.Netns, to netcheck.Netns, toAddr netip.Addr, n int, interval time.Duration, tap *probeTap) (owdResult, error) {
	var rc *net.UDPConn
	if err := to.Do(func() (err error) {
		rc, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(toAddr, 0)))
		return err
	}); err != nil {
		return owdResult{}, fmt.Errorf("one-way probe receiver: %w", err)
	}
	defer rc.Close()
	if err := enableRxTimestamps(rc); err != nil {
		return owdResult{}, fmt.Errorf("one-way probe receiver: %w", err)
	}
	var sc *net.UDPConn
	if err := from.Do(func() (err error) {
		sc, err = net.DialUDP("udp4", nil, rc.LocalAddr().(*net.UDPAddr))
		return err
	}); err != nil {
		return owdResult{}, fmt.Errorf("one-way probe sender: %w", err)
	}
	defer sc.Close()
	stop := context.AfterFunc(ctx, func() {
		_ = rc.SetReadDeadline(time.Now())
		_ = sc.SetWriteDeadline(time.Now())
	})
	defer stop()
	stopTap := tap.follow(uint16(rc.LocalAddr().(*net.UDPAddr).Port), n)

	probes := make([]owdSample, n) // user == 0: not received
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 64)
		oob := make([]byte, 128)
		for {
			k, oobn, _, _, err := rc.ReadMsgUDP(buf, oob)
			now := clock.Now()
			if err != nil {
				return
			}
			if k != owdPayload {
				continue
			}
			seq := binary.BigEndian.Uint64(buf[0:8])
			sent := int64(binary.BigEndian.Uint64(buf[8:16]))
			kernel := rxTimestamp(oob[:oobn], now)
			mu.Lock()
			if seq < uint64(n) && probes[seq].user == 0 {
				probes[seq] = owdSample{sent: sent, kernel: kernel, user: max(now, sent+1)}
			}
			mu.Unlock()
		}
	}()

	p := make([]byte, owdPayload)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	base := time.Now()
	var sendErr error
	for i := range n {
		timer.Reset(time.Until(base.Add(time.Duration(i) * interval)))
		select {
		case <-timer.C:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			sendErr = context.Cause(ctx)
			break
		}
		binary.BigEndian.PutUint64(p[0:8], uint64(i))
		binary.BigEndian.PutUint64(p[8:16], uint64(clock.Now()))
		if _, err := sc.Write(p); err != nil {
			sendErr = fmt.Errorf("send one-way probe %d: %w", i, err)
			break
		}
	}
	if sendErr == nil {
		timer.Reset(owdTail)
		select {
		case <-timer.C:
		case <-ctx.Done():
			sendErr = context.Cause(ctx)
		}
	}
	_ = rc.SetReadDeadline(time.Now())
	<-done
	hops := stopTap()
	if sendErr != nil {
		return owdResult{}, sendErr
	}
	res := owdResult{Sent: n}
	for i, pr := range probes {
		if pr.user == 0 {
			continue
		}
		if i < len(hops) {
			pr.hop = hops[i]
		}
		res.SamplesMs = append(res.SamplesMs, float64(pr.user-pr.sent)/1e6)
		res.Probes = append(res.Probes, pr)
	}
	if len(res.SamplesMs) == 0 {
		return res, errors.New("no one-way probe arrived")
	}
	return res, nil
}

// enableRxTimestamps asks the kernel to stamp every datagram c receives
// (SO_TIMESTAMPNS): when it arrived at the socket, before the receiving
// goroutine was scheduled.
func enableRxTimestamps(c *net.UDPConn) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return fmt.Errorf("receive timestamps: %w", err)
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
	}); err != nil {
		return fmt.Errorf("receive timestamps: %w", err)
	}
	if serr != nil {
		return fmt.Errorf("receive timestamps: SO_TIMESTAMPNS: %w", serr)
	}
	return nil
}

// rxTimestamp returns the kernel's receive timestamp in oob on clock.Now's
// clock, or 0. The kernel stamps CLOCK_REALTIME; the offset between the
// two clocks is read next to monoNow (a read of both within a microsecond).
func rxTimestamp(oob []byte, monoNow int64) int64 {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return 0
	}
	for _, m := range msgs {
		if m.Header.Level != unix.SOL_SOCKET || m.Header.Type != unix.SCM_TIMESTAMPNS || len(m.Data) < 16 {
			continue
		}
		sec := int64(binary.NativeEndian.Uint64(m.Data[0:8]))
		nsec := int64(binary.NativeEndian.Uint64(m.Data[8:16]))
		offset := time.Now().UnixNano() - clock.Now() // realtime − monotonic
		return sec*1e9 + nsec - offset
	}
	return 0
}
