package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// iperfPort is iperf3's default port: every server runs in its own
// namespace, so it never clashes.
const iperfPort = 5201

// namespace is where a process runs: a lab site or a veth namespace.
type namespace interface {
	Do(f func() error) error
	Start(cmd *exec.Cmd) error
}

// iperfResult is what one iperf3 TCP test reports (-J).
type iperfResult struct {
	SentBps      float64 `json:"sent_bps"`
	ReceivedBps  float64 `json:"received_bps"` // goodput at the receiver
	Retransmits  int64   `json:"retransmits"`
	Seconds      float64 `json:"seconds"`
	HostCPUPct   float64 `json:"client_cpu_pct"`
	RemoteCPUPct float64 `json:"server_cpu_pct"`
}

// requireIperf fails with a clear message when iperf3 is missing.
func requireIperf() error {
	if _, err := exec.LookPath("iperf3"); err != nil {
		return errors.New("iperf3 is missing: run `scripts/deps.sh bench` (or apt-get install iperf3)")
	}
	return nil
}

// iperf runs one iperf3 TCP test of seconds from cli to a one-off server at
// addr in srv, cubic, and returns its figures. Both processes end with
// ctx; the call is bounded by seconds plus a setup margin.
func iperf(ctx context.Context, srv namespace, addr netip.Addr, cli namespace, seconds int) (iperfResult, error) {
	return iperfWith(ctx, srv, addr, cli, seconds)
}

// iperfWith is iperf with more client options (e.g. "-P", "8" for
// parallel streams, "-O", "3" to leave the first 3 s out of the figures).
func iperfWith(ctx context.Context, srv namespace, addr netip.Addr, cli namespace, seconds int, clientArgs ...string) (iperfResult, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(seconds)*time.Second+30*time.Second)
	defer cancel()
	port := strconv.Itoa(iperfPort)

	var srvOut bytes.Buffer
	server := boundCommand(ctx, "iperf3", "-s", "-1", "-B", addr.String(), "-p", port)
	server.Stdout, server.Stderr = &srvOut, &srvOut
	if err := srv.Start(server); err != nil {
		return iperfResult{}, fmt.Errorf("start iperf3 server: %w", err)
	}
	srvDone := make(chan struct{})
	var srvErr error
	go func() { srvErr = server.Wait(); close(srvDone) }()
	defer func() {
		// With -1 the server ends after the test; give it a moment.
		select {
		case <-srvDone:
		case <-time.After(3 * time.Second):
			_ = server.Process.Kill()
			<-srvDone
		}
	}()
	if err := waitListening(ctx, srv, iperfPort, srvDone); err != nil {
		_ = server.Process.Kill()
		<-srvDone
		return iperfResult{}, fmt.Errorf("iperf3 server: %w (exit: %v): %s", err, srvErr, strings.TrimSpace(srvOut.String()))
	}

	var out, errOut bytes.Buffer
	args := append([]string{"-c", addr.String(), "-p", port, "-t", strconv.Itoa(seconds),
		"-C", "cubic", "-J", "--connect-timeout", "5000"}, clientArgs...)
	client := boundCommand(ctx, "iperf3", args...)
	client.Stdout, client.Stderr = &out, &errOut
	if err := cli.Start(client); err != nil {
		return iperfResult{}, fmt.Errorf("start iperf3 client: %w", err)
	}
	werr := client.Wait()
	if ctx.Err() != nil {
		return iperfResult{}, fmt.Errorf("iperf3: %w", context.Cause(ctx))
	}
	res, perr := parseIperf(out.Bytes())
	if perr != nil {
		return iperfResult{}, fmt.Errorf("iperf3 client: %w (exit: %v; stderr: %s)", perr, werr, strings.TrimSpace(errOut.String()))
	}
	return res, nil
}

// boundCommand ends the process with SIGTERM when ctx is done, and kills
// it if it has not exited 2 s later.
func boundCommand(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 2 * time.Second
	return cmd
}

func parseIperf(b []byte) (iperfResult, error) {
	var j struct {
		Error string `json:"error"`
		End   struct {
			SumSent struct {
				Seconds       float64 `json:"seconds"`
				BitsPerSecond float64 `json:"bits_per_second"`
				Retransmits   int64   `json:"retransmits"`
			} `json:"sum_sent"`
			SumReceived struct {
				Seconds       float64 `json:"seconds"`
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
			CPU struct {
				HostTotal   float64 `json:"host_total"`
				RemoteTotal float64 `json:"remote_total"`
			} `json:"cpu_utilization_percent"`
		} `json:"end"`
	}
	if err := json.Unmarshal(b, &j); err != nil {
		return iperfResult{}, fmt.Errorf("parse iperf3 JSON: %w", err)
	}
	if j.Error != "" {
		return iperfResult{}, errors.New(j.Error)
	}
	if j.End.SumReceived.Seconds == 0 {
		return iperfResult{}, errors.New("iperf3 reported no received bytes")
	}
	return iperfResult{
		SentBps:      j.End.SumSent.BitsPerSecond,
		ReceivedBps:  j.End.SumReceived.BitsPerSecond,
		Retransmits:  j.End.SumSent.Retransmits,
		Seconds:      j.End.SumReceived.Seconds,
		HostCPUPct:   j.End.CPU.HostTotal,
		RemoteCPUPct: j.End.CPU.RemoteTotal,
	}, nil
}

// waitListening polls the namespace's TCP table until something listens on
// port (iperf3 gives no readiness signal), the server exits, or 10 s pass.
func waitListening(ctx context.Context, ns namespace, port int, exited <-chan struct{}) error {
	want := fmt.Sprintf(":%04X", port)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var listening bool
		err := ns.Do(func() error {
			b, err := os.ReadFile("/proc/thread-self/net/tcp")
			if err != nil {
				return err
			}
			for _, line := range strings.Split(string(b), "\n")[1:] {
				f := strings.Fields(line)
				if len(f) > 3 && strings.HasSuffix(f[1], want) && f[3] == "0A" {
					listening = true
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		if listening {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not listening on port %d after 10s", port)
		}
		select {
		case <-exited:
			return errors.New("exited before listening")
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
