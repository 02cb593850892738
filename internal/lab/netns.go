package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// netnsDir is where `ip netns` keeps named namespaces.
const netnsDir = "/run/netns"

// InNetns runs f on a fresh OS thread that has joined the network
// namespace named name (as `ip netns` names them); Site.Do is it for a
// site. Sockets and TUN devices created by f stay in that namespace.
func InNetns(name string, f func() error) error { return inNetns(name, f) }

func inNetns(name string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// The thread is never unlocked if returning to the root namespace
		// fails: Go then destroys it rather than reuse a thread in the
		// wrong namespace.
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			errc <- fmt.Errorf("open own netns: %w", err)
			return
		}
		defer orig.Close()
		target, err := os.Open(filepath.Join(netnsDir, name))
		if err != nil {
			errc <- fmt.Errorf("open netns %s: %w", name, err)
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("enter netns %s: %w", name, err)
			return
		}
		ferr := f()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("leave netns %s: %w", name, err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// runIP runs the ip command with a bounded time and returns its error
// with ip's own message.
func runIP(ctx context.Context, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func netnsExists(name string) bool {
	_, err := os.Stat(filepath.Join(netnsDir, name))
	return err == nil
}

// deleteNetns removes a named namespace and waits until it is gone (the
// kernel frees it asynchronously).
func deleteNetns(ctx context.Context, name string) error {
	if !netnsExists(name) {
		return nil
	}
	if err := runIP(ctx, "netns", "del", name); err != nil && netnsExists(name) {
		return err
	}
	deadline := time.Now().Add(5 * time.Second)
	for netnsExists(name) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// listNetns returns the named namespaces whose names start with prefix.
func listNetns(prefix string) []string {
	ents, err := os.ReadDir(netnsDir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out
}

// writeProc writes a /proc/sys value in the calling thread's namespace.
func writeProc(path, value string) error {
	if err := os.WriteFile(path, []byte(value), 0); err != nil {
		return fmt.Errorf("set %s = %q: %w", procToSysctl(path), value, err)
	}
	return nil
}

func readProc(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

func procToSysctl(path string) string {
	return strings.ReplaceAll(strings.TrimPrefix(path, "/proc/sys/"), "/", ".")
}
