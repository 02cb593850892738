package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// EnterAndExec replaces the current process with argv running inside a
// site: it joins the site's cgroups, enters its network namespace and
// execs. The exit status is argv's own. It returns only on error.
func EnterAndExec(netns string, cgroups []string, argv []string) error {
	if len(argv) == 0 {
		return fmt.Errorf("no command given")
	}
	bin, err := exec.LookPath(argv[0])
	if err != nil {
		return fmt.Errorf("%s: command not found", argv[0])
	}
	// setns applies to one thread, and exec keeps the calling thread's
	// namespaces: both must happen on the same, locked thread.
	runtime.LockOSThread()
	if err := joinCgroups(os.Getpid(), cgroups); err != nil {
		return err
	}
	f, err := os.Open(filepath.Join(netnsDir, netns))
	if err != nil {
		return fmt.Errorf("open netns %s: %w", netns, err)
	}
	if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("enter netns %s: %w", netns, err)
	}
	return syscall.Exec(bin, argv, os.Environ())
}

// Start starts cmd inside site s: it is forked from a thread that is in
// the site's network namespace, directly into the site's cgroups, so the
// child is confined before it runs any code. On cgroup v2 the kernel puts
// it there (clone3 with CLONE_INTO_CGROUP); on v1, which moves single
// threads, the forking thread joins the site's cgroups for the moment of
// the fork.
func (s *Site) Start(cmd *exec.Cmd) error {
	var v1 []string
	for _, d := range s.Cgroups {
		if !isV2(d) {
			v1 = append(v1, d)
			continue
		}
		f, err := os.Open(d)
		if err != nil {
			return fmt.Errorf("open cgroup %s: %w", d, err)
		}
		defer f.Close()
		var attr syscall.SysProcAttr
		if cmd.SysProcAttr != nil {
			attr = *cmd.SysProcAttr // the caller's credentials stay
		}
		attr.UseCgroupFD, attr.CgroupFD = true, int(f.Fd())
		cmd.SysProcAttr = &attr
	}
	if len(v1) == 0 {
		return s.Do(cmd.Start)
	}
	m, err := systemCgroups()
	if err != nil {
		return err
	}
	return s.Do(func() error {
		tid := unix.Gettid()
		orig, err := threadCgroupsV1(m, v1)
		if err != nil {
			return err
		}
		if err := moveThreadV1(tid, v1); err != nil {
			if moveThreadV1(tid, orig) != nil {
				runtime.LockOSThread() // retired with the thread, as below
			}
			return err
		}
		startErr := cmd.Start()
		if err := moveThreadV1(tid, orig); err != nil {
			// Keep the thread locked so Go retires it instead of reusing a
			// thread confined to the site.
			runtime.LockOSThread()
			return errors.Join(startErr, err)
		}
		return startErr
	})
}

// DialContext connects from inside the site: the socket is created in the
// site's namespace, so the connection crosses the lab's links.
//
// TCP and UDP sockets carry linkem.ClientTOS: the emulator counts them as
// client traffic (classes.go).
func (s *Site) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := s.Do(func() (err error) {
		d := net.Dialer{Control: markClient}
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}
