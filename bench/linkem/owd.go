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
	SamplesMs []float64 // received probes, in sending order
}

// oneWay sends n small UDP probes, one every interval, from one namespace
// to a socket in another and measures each one's one-way delay. Sender and
// receiver are in this process and share its monotonic clock, so a
// one-way delay needs no clock synchronisation: unlike a round trip it can
// measure one direction of a link alone.
func oneWay(ctx context.Context, from netcheck.Netns, to netcheck.Netns, toAddr netip.Addr, n int, interval time.Duration) (owdResult, error) {
	var rc *net.UDPConn
	if err := to.Do(func() (err error) {
		rc, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(toAddr, 0)))
		return err
	}); err != nil {
		return owdResult{}, fmt.Errorf("one-way probe receiver: %w", err)
	}
	defer rc.Close()
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

	base := time.Now()
	delays := make([]time.Duration, n) // 0 = not received
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 64)
		for {
			k, err := rc.Read(buf)
			now := time.Since(base)
			if err != nil {
				return
			}
			if k != owdPayload {
				continue
			}
			seq := binary.BigEndian.Uint64(buf[0:8])
			sent := time.Duration(binary.BigEndian.Uint64(buf[8:16]))
			mu.Lock()
			if seq < uint64(n) && delays[seq] == 0 {
				delays[seq] = max(now-sent, 1)
			}
			mu.Unlock()
		}
	}()

	p := make([]byte, owdPayload)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
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
		binary.BigEndian.PutUint64(p[8:16], uint64(time.Since(base)))
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
	if sendErr != nil {
		return owdResult{}, sendErr
	}
	res := owdResult{Sent: n}
	for _, d := range delays {
		if d > 0 {
			res.SamplesMs = append(res.SamplesMs, float64(d)/1e6)
		}
	}
	if len(res.SamplesMs) == 0 {
		return res, errors.New("no one-way probe arrived")
	}
	return res, nil
}
