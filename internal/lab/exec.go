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
	"strconv"
	"strings"
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
// the site's network namespace and, for the moment of the fork, in the
// site's cgroups (cgroup v1 moves single threads), so the child is
// confined before it runs any code.
func (s *Site) Start(cmd *exec.Cmd) error {
	return s.Do(func() error {
		tid := unix.Gettid()
		orig, err := threadCgroups(s.Cgroups)
		if err != nil {
			return err
		}
		if err := moveThread(tid, s.Cgroups); err != nil {
			return err
		}
		startErr := cmd.Start()
		if err := moveThread(tid, orig); err != nil {
			// Keep the thread locked so Go retires it instead of reusing a
			// thread confined to the site.
			runtime.LockOSThread()
			return errors.Join(startErr, err)
		}
		return startErr
	})
}

// threadCgroups returns, for each cgroup dir in dirs, the directory of the
// same controller that the calling thread is in now.
func threadCgroups(dirs []string) ([]string, error) {
	b, err := os.ReadFile("/proc/thread-self/cgroup")
	if err != nil {
		return nil, err
	}
	cur := map[string]string{} // controller mount dir -> path
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		for _, c := range strings.Split(f[1], ",") {
			cur[c] = f[2]
		}
	}
	out := make([]string, 0, len(dirs))
	for _, d := range dirs {
		ctrl := filepath.Base(filepath.Dir(d))
		p, ok := cur[ctrl]
		if !ok {
			return nil, fmt.Errorf("thread is in no %s cgroup", ctrl)
		}
		out = append(out, filepath.Join(cgroupRoot, ctrl, p))
	}
	return out, nil
}

func moveThread(tid int, dirs []string) error {
	for _, d := range dirs {
		if err := os.WriteFile(filepath.Join(d, "tasks"), []byte(strconv.Itoa(tid)), 0); err != nil {
			return fmt.Errorf("move thread into cgroup %s: %w", d, err)
		}
	}
	return nil
}

// DialContext connects from inside the site: the socket is created in the
// site's namespace, so the connection crosses the lab's links.
func (s *Site) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := s.Do(func() (err error) {
		var d net.Dialer
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}
