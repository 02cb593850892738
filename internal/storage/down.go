package storage

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Down removes what rec describes, in the order that loses nothing: the
// node's file system (flushed across the link), the loop device,
// nbdfuse's mount, then the clients and the servers, then the volume's
// directory. h holds what this process started (nil after a crash: the
// record's PIDs are used, checked against their start times). With
// linksUp false — the lab's link emulator is gone and nothing crosses the
// links — the clients are killed first, so that pending I/O fails at once
// instead of waiting for a server it can no longer reach. save is called
// after each step.
func Down(ctx context.Context, rec *Record, h *Handle, linksUp bool, save func() error) error {
	var errs []error
	if h != nil {
		h.mu.Lock()
		h.closed = true
		if h.ln != nil {
			h.ln.Close()
		}
		h.mu.Unlock()
	}
	if !linksUp {
		for _, p := range rec.Procs {
			if p.Client {
				stopProc(h, p, syscall.SIGKILL, 0)
			}
		}
	}
	if rec.Mount != "" {
		if err := unmount(ctx, rec.Mount); err != nil {
			errs = append(errs, err)
		} else {
			rec.Mount = ""
			_ = save()
		}
	}
	if rec.Loop != "" {
		if err := detachLoop(ctx, rec.Loop, rec.Dir); err != nil {
			errs = append(errs, err)
		} else {
			rec.Loop = ""
			_ = save()
		}
	}
	if rec.FuseMount != "" {
		if err := unmount(ctx, rec.FuseMount); err != nil {
			errs = append(errs, err)
		} else {
			rec.FuseMount = ""
			_ = save()
		}
	}
	// Clients exit once unmounted; servers once told (an sftp-server
	// when its client has gone).
	for _, client := range []bool{true, false} {
		for _, p := range rec.Procs {
			if p.Client == client {
				stopProc(h, p, syscall.SIGTERM, 5*time.Second)
			}
		}
	}
	if h != nil {
		for _, p := range h.Procs() { // sftp-servers started after the record was read
			stopProc(h, p, syscall.SIGTERM, 5*time.Second)
		}
		h.wg.Wait()
	}
	rec.Procs = nil
	_ = save()
	if len(errs) == 0 && rec.Dir != "" {
		if m := mountsUnder(rec.Dir); len(m) > 0 {
			errs = append(errs, fmt.Errorf("still mounted, not removed: %s", strings.Join(m, ", ")))
		} else if err := os.RemoveAll(rec.Dir); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("remove storage %s of node %s: %w", rec.Storage, rec.Node, errors.Join(errs...))
	}
	return nil
}

// unmount unmounts dir, waiting for a busy file system to be released; a
// file system still busy after that is detached (MNT_DETACH) and goes when
// its last user does.
func unmount(ctx context.Context, dir string) error {
	deadline := time.Now().Add(10 * time.Second)
	for mounted(dir) {
		err := unix.Unmount(dir, 0)
		switch {
		case err == nil:
			continue
		case errors.Is(err, unix.EBUSY) && time.Now().Before(deadline) && ctx.Err() == nil:
			time.Sleep(50 * time.Millisecond)
		case errors.Is(err, unix.EBUSY) || errors.Is(err, unix.ENOTCONN) || errors.Is(err, unix.EIO):
			if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
				return fmt.Errorf("unmount %s: %w", dir, err)
			}
		case errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT):
			return nil // not a mount point (any more)
		default:
			return fmt.Errorf("unmount %s: %w", dir, err)
		}
	}
	return nil
}

// detachLoop detaches dev if its backing file is in dir (a loop device
// number is reused by others once free).
func detachLoop(ctx context.Context, dev, dir string) error {
	b, err := os.ReadFile(filepath.Join("/sys/block", filepath.Base(dev), "loop", "backing_file"))
	if err != nil || !strings.HasPrefix(strings.TrimSpace(string(b)), dir+"/") {
		return nil // detached already, or someone else's now
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := run(ctx, "losetup", "-d", dev)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stopProc signals p and waits up to timeout for it to exit, then kills
// it. A process known only from the record is signalled only while its
// PID still has the recorded start time.
func stopProc(h *Handle, p Proc, sig syscall.Signal, timeout time.Duration) {
	if h != nil {
		h.mu.Lock()
		var own *Proc
		for _, q := range h.procs {
			if q.PID == p.PID {
				own = q
			}
		}
		h.mu.Unlock()
		if own != nil {
			select {
			case <-own.exited:
				return
			default:
			}
			_ = own.cmd.Process.Signal(sig)
			select {
			case <-own.exited:
			case <-time.After(timeout):
				_ = own.cmd.Process.Kill()
				<-own.exited
			}
			return
		}
	}
	alive := func() bool { return p.PID > 0 && p.Start != "" && procStart(p.PID) == p.Start }
	if !alive() {
		return
	}
	_ = syscall.Kill(p.PID, sig)
	deadline := time.Now().Add(timeout)
	for alive() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if alive() {
		_ = syscall.Kill(p.PID, syscall.SIGKILL)
		for i := 0; alive() && i < 100; i++ {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// mountsUnder lists the mount points at or below dir.
func mountsUnder(dir string) []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 {
			if m := unescape(f[4]); m == dir || strings.HasPrefix(m, dir+"/") {
				out = append(out, m)
			}
		}
	}
	return out
}
