package xrd

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"replab/internal/testkit"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

const xrootdBin = "/usr/bin/xrootd"

// serverSeq makes server names unique within this test process.
var serverSeq atomic.Int64

// server is a real xrootd data server on loopback, started for one test.
type server struct {
	t      *testing.T
	addr   string
	port   int
	dir    string
	cfg    string
	cmd    *exec.Cmd
	exited <-chan struct{} // closed when the process has been waited for
	once   sync.Once
}

// startServer runs xrootd exporting files (path relative to the export root
// -> contents) and returns once it answers kXR_ping. The server is killed in
// t.Cleanup, even if the test fails.
func startServer(t *testing.T, files map[string][]byte) *server {
	t.Helper()
	testkit.Need(t, testkit.XRootD)
	dir := t.TempDir()
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("replab")
		if err != nil {
			t.Fatalf("running as root, the server runs as user replab, which is missing (%v): run scripts/deps.sh test", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		// t.TempDir's parent is private to root; the server needs to reach dir.
		if err := os.Chmod(filepath.Dir(dir), 0o711); err != nil {
			t.Fatal(err)
		}
	}
	data := filepath.Join(dir, "data")
	for name, b := range files {
		p := filepath.Join(data, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "admin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if cred != nil {
		for _, p := range []string{dir, filepath.Join(dir, "admin")} {
			if err := os.Chown(p, int(cred.Uid), int(cred.Gid)); err != nil {
				t.Fatal(err)
			}
		}
	}

	s := &server{t: t, dir: dir, cfg: filepath.Join(dir, "xrootd.cfg")}
	t.Cleanup(s.cleanup)
	name := fmt.Sprintf("replab-xrdtest-%d-%d", os.Getpid(), serverSeq.Add(1))
	for attempt := 1; ; attempt++ {
		s.port = freePort(t)
		s.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
		cfg := fmt.Sprintf("xrd.port %d\nall.export /\noss.localroot %s\nall.adminpath %s\nall.pidpath %s\nxrd.network nodnr\n",
			s.port, data, filepath.Join(dir, "admin"), filepath.Join(dir, "admin"))
		if err := os.WriteFile(s.cfg, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := os.Create(filepath.Join(dir, "stdout.log"))
		if err != nil {
			t.Fatal(err)
		}
		s.cmd = exec.Command(xrootdBin, "-c", s.cfg, "-l", filepath.Join(dir, "xrd.log"), "-n", name, "-I", "v4")
		s.cmd.Dir = dir
		s.cmd.Stdout, s.cmd.Stderr = out, out
		s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: cred}
		// Killed if the test binary dies (testkit.StartTied: not when a
		// thread of it does).
		exited, err := testkit.StartTied(s.cmd)
		out.Close()
		if err != nil {
			t.Fatalf("start xrootd: %v", err)
		}
		s.exited = exited
		s.once = sync.Once{}

		err = s.waitReady(20 * time.Second)
		if err == nil {
			s.checkUser(cred)
			return s
		}
		tail := s.logTail()
		s.kill()
		// Another process may have taken the free port in the meantime.
		if attempt < 3 && strings.Contains(tail, "in use") {
			continue
		}
		t.Fatalf("xrootd on %s did not become ready: %v\n--- server log tail ---\n%s", s.addr, err, tail)
	}
}

// waitReady retries Dial+Ping until it works, the server exits or the
// deadline passes.
func (s *server) waitReady(limit time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	var last error
	for {
		select {
		case <-s.exited:
			return fmt.Errorf("xrootd exited (%v); last probe: %v", s.cmd.ProcessState, last)
		default:
		}
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		c, err := Dial(pctx, nil, s.addr, "probe")
		if err == nil {
			err = c.Ping(pctx)
			c.Close()
		}
		pcancel()
		if err == nil {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("no answer within %v: %v", limit, last)
		case <-s.exited:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// checkUser fails the test unless the server runs as cred's user (as the
// test's own user when cred is nil).
func (s *server) checkUser(cred *syscall.Credential) {
	s.t.Helper()
	want := uint32(os.Geteuid())
	if cred != nil {
		want = cred.Uid
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		s.t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "Uid:" {
			if f[2] != strconv.FormatUint(uint64(want), 10) {
				s.t.Fatalf("xrootd runs with uid %s, want %d", f[2], want)
			}
			return
		}
	}
	s.t.Fatal("no Uid line in the server's /proc status")
}

// kill ends the server's process group and waits for it.
func (s *server) kill() {
	s.once.Do(func() {
		if s.cmd == nil || s.cmd.Process == nil {
			return
		}
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
			s.t.Errorf("xrootd (pid %d) not reaped 10 s after SIGKILL", s.cmd.Process.Pid)
		}
	})
}

// signal sends sig to the server's process group (SIGSTOP, SIGCONT).
func (s *server) signal(sig syscall.Signal) {
	s.t.Helper()
	if err := syscall.Kill(-s.cmd.Process.Pid, sig); err != nil {
		s.t.Fatalf("signal %v to xrootd: %v", sig, err)
	}
}

// stop stops the server with SIGSTOP and waits until all its threads are
// stopped: the signal takes effect asynchronously.
func (s *server) stop() {
	s.t.Helper()
	s.signal(syscall.SIGSTOP)
	deadline := time.Now().Add(10 * time.Second)
	for {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", s.cmd.Process.Pid))
		running := len(tasks) == 0
		for _, p := range tasks {
			b, err := os.ReadFile(p)
			if err != nil {
				continue // thread gone
			}
			// The state follows the parenthesized command name.
			if i := bytes.LastIndexByte(b, ')'); i < 0 || i+2 >= len(b) || b[i+2] != 'T' {
				running = true
			}
		}
		if !running {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatal("xrootd threads still running 10 s after SIGSTOP")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// cleanup kills the server and checks that no process with our config runs.
func (s *server) cleanup() {
	s.kill()
	if s.t.Failed() {
		s.t.Logf("--- xrootd log tail (%s) ---\n%s", s.addr, s.logTail())
	}
	out, err := exec.Command("pgrep", "-f", s.cfg).Output()
	if err == nil && len(bytes.TrimSpace(out)) > 0 {
		s.t.Errorf("xrootd processes left behind for %s: %s", s.cfg, out)
	}
}

// logTail returns the last lines of the server's log files.
func (s *server) logTail() string {
	var b strings.Builder
	logs, _ := filepath.Glob(filepath.Join(s.dir, "*", "xrd.log"))
	logs = append(logs, filepath.Join(s.dir, "xrd.log"), filepath.Join(s.dir, "stdout.log"))
	for _, p := range logs {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		fmt.Fprintf(&b, "== %s\n%s\n", p, strings.Join(lines[max(0, len(lines)-30):], "\n"))
	}
	return b.String()
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// establishedTo counts this network namespace's established TCP sockets whose
// remote port is port: the client ends of connections to a local server.
func establishedTo(port int) (int, error) {
	n := 0
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		fh, err := os.Open(f)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, err
		}
		sc := bufio.NewScanner(fh)
		sc.Scan() // header
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 4 || fields[3] != "01" { // 01: ESTABLISHED
				continue
			}
			_, hexPort, ok := strings.Cut(fields[2], ":")
			if p, err := strconv.ParseUint(hexPort, 16, 16); ok && err == nil && int(p) == port {
				n++
			}
		}
		err = sc.Err()
		fh.Close()
		if err != nil {
			return 0, err
		}
	}
	return n, nil
}
