package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"replab/bench/internal/benchkit"
)

// The ceiling is measured over a veth pair between two namespaces of our
// own, outside any lab.
const (
	vethNSA  = "bench-veth-a"
	vethNSB  = "bench-veth-b"
	vethDevA = "bveth-a"
	vethDevB = "bveth-b"
)

var (
	vethAddrA = netip.MustParseAddr("192.0.2.1") // RFC 5737 documentation range
	vethAddrB = netip.MustParseAddr("192.0.2.2")
)

// netnsName is a named network namespace (/run/netns/NAME) that is not
// part of a lab.
type netnsName string

// Do runs f on a thread inside the namespace. The thread is retired
// afterwards rather than returned to the runtime.
func (n netnsName) Do(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		fd, err := os.Open("/run/netns/" + string(n))
		if err != nil {
			errc <- fmt.Errorf("open netns %s: %w", n, err)
			return
		}
		defer fd.Close()
		if err := unix.Setns(int(fd.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("enter netns %s: %w", n, err)
			return
		}
		errc <- f()
	}()
	return <-errc
}

// Start starts cmd inside the namespace (forked from a thread in it).
func (n netnsName) Start(cmd *exec.Cmd) error {
	return n.Do(cmd.Start)
}

// vethUp creates the two namespaces joined by a veth pair, removing what
// an earlier, interrupted run left behind first.
func vethUp(ctx context.Context) error {
	if err := vethDown(ctx); err != nil {
		return err
	}
	steps := [][]string{
		{"netns", "add", vethNSA},
		{"netns", "add", vethNSB},
		{"link", "add", vethDevA, "netns", vethNSA, "type", "veth", "peer", "name", vethDevB, "netns", vethNSB},
		{"-n", vethNSA, "addr", "add", vethAddrA.String() + "/24", "dev", vethDevA},
		{"-n", vethNSB, "addr", "add", vethAddrB.String() + "/24", "dev", vethDevB},
		{"-n", vethNSA, "link", "set", "lo", "up"},
		{"-n", vethNSB, "link", "set", "lo", "up"},
		{"-n", vethNSA, "link", "set", vethDevA, "up"},
		{"-n", vethNSB, "link", "set", vethDevB, "up"},
	}
	for _, args := range steps {
		if err := ip(ctx, args...); err != nil {
			return errors.Join(err, vethDown(context.Background()))
		}
	}
	return nil
}

// vethDown kills what still runs in the veth namespaces and deletes them
// (which deletes the veth pair), waiting until they are gone.
func vethDown(ctx context.Context) error {
	var errs []error
	for _, ns := range []string{vethNSA, vethNSB} {
		if _, err := os.Stat("/run/netns/" + ns); err != nil {
			continue
		}
		if out, err := exec.CommandContext(ctx, "ip", "netns", "pids", ns).Output(); err == nil {
			for _, f := range strings.Fields(string(out)) {
				var pid int
				// Only an iperf3 an interrupted run of this program left there.
				if _, err := fmt.Sscan(f, &pid); err == nil && pid > 1 && benchkit.ReadTrim(fmt.Sprintf("/proc/%d/comm", pid)) == "iperf3" {
					_ = unix.Kill(pid, unix.SIGKILL)
				}
			}
		}
		if err := ip(ctx, "netns", "del", ns); err != nil {
			errs = append(errs, err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		_, ea := os.Stat("/run/netns/" + vethNSA)
		_, eb := os.Stat("/run/netns/" + vethNSB)
		if ea != nil && eb != nil {
			return errors.Join(errs...)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return errors.Join(append(errs, errors.New("veth namespaces still present after 5s"))...)
}

// ip runs the ip command, bounded in time, returning ip's own message.
func ip(ctx context.Context, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
