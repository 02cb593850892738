package testkit

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The machine's test lock lets integration tests of every package run side
// by side (most wait on servers and links, not on the CPU) while a test
// that measures time — a latency against a link's delay, a CPU share, a
// rate — runs alone: on two cores a neighbour's work is in its figures. It
// is a readers-writer lock over flock(2), machine-wide (every test binary of
// every run here), fair to the writer: a turnstile file is held while
// taking the lock, so once an exclusive test waits no shared one overtakes
// it.

type mode int

const (
	shared mode = iota + 1
	exclusive
)

// Exclusive makes t run alone on the machine among replab's integration
// tests (those that Need Lab): it waits until the running ones are done,
// and the others wait for it. For tests whose assertions depend on the
// machine's speed; call it first, before Need. It implies Need(t, Lab).
func Exclusive(t testing.TB) {
	t.Helper()
	skipUnless(t, []Req{Lab})
	hold(t, exclusive)
}

// Alone runs measure with the machine to itself among the integration
// tests, and t shares it again afterwards: for a test whose setup and
// checks need not be timed but whose measurement does, so that the others
// wait only for the measurement. Call it from a test that holds the shared
// lock (Need(t, Lab)), not from its subtests.
func Alone(t testing.TB, measure func()) {
	t.Helper()
	switchTo(t, exclusive)
	defer switchTo(t, shared)
	measure()
}

// switchTo changes the mode of the lock t took.
func switchTo(t testing.TB, m mode) {
	t.Helper()
	mu.Lock()
	h := held[t.Name()]
	mu.Unlock()
	if h == nil {
		t.Fatalf("testkit: %s holds no lock of its own: call Need(t, testkit.Lab) first, in the test itself", t.Name())
	}
	if h.mode == m {
		return
	}
	h.close()
	f, err := acquire(t.Logf, m)
	if err != nil {
		t.Fatalf("testkit: the machine's test lock: %v", err)
	}
	keep(t, m, f)
}

type holding struct {
	mode mode
	f    *os.File
	// since: when an exclusive hold began, and logf says how long it
	// lasted when it ends (every second alone is a second the suite's
	// other integration tests waited).
	since time.Time
	logf  func(format string, args ...any)
}

// keep records that t holds the lock in mode m through f, from now.
func keep(t testing.TB, m mode, f *os.File) {
	mu.Lock()
	held[t.Name()] = &holding{mode: m, f: f, since: time.Now(), logf: t.Logf}
	mu.Unlock()
}

// close lets the lock go.
func (h *holding) close() {
	h.f.Close() // closing the file drops its flock
	if h.mode == exclusive {
		h.logf("testkit: had the machine alone for %.1f s", time.Since(h.since).Seconds())
	}
}

var (
	mu sync.Mutex
	// held is the lock this process holds, by the name of the test that
	// took it: its subtests share it.
	held = map[string]*holding{}
)

// hold takes the lock in mode m for t until t ends, unless t or a parent
// of it holds it already in m or stronger.
func hold(t testing.TB, m mode) {
	t.Helper()
	mu.Lock()
	owner, h := holder(t.Name())
	mu.Unlock()
	if h != nil && h.mode >= m {
		return
	}
	if h != nil {
		// An upgrade: only where the shared lock was taken, or a subtest
		// would wait for its own parent.
		if owner != t.Name() {
			t.Fatalf("testkit: %s shares the machine, so its subtest cannot take it alone: call Exclusive at the start of %s", owner, owner)
		}
		release(t.Name())
	}
	f, err := acquire(t.Logf, m)
	if err != nil {
		t.Fatalf("testkit: the machine's test lock: %v", err)
	}
	keep(t, m, f)
	if h == nil {
		name := t.Name()
		t.Cleanup(func() { release(name) })
	}
}

// holder finds the lock held by the test called name or by a parent.
func holder(name string) (string, *holding) {
	for n := name; ; {
		if h := held[n]; h != nil {
			return n, h
		}
		i := strings.LastIndexByte(n, '/')
		if i < 0 {
			return "", nil
		}
		n = n[:i]
	}
}

func release(name string) {
	mu.Lock()
	h := held[name]
	delete(held, name)
	mu.Unlock()
	if h != nil {
		h.close()
	}
}

// lockDir is where the lock files live: one place for the whole machine.
var lockDir = os.TempDir()

// acquire takes the lock, saying so to logf when it has to wait.
func acquire(logf func(format string, args ...any), m mode) (*os.File, error) {
	turn, err := openLock("replab-tests.turnstile.lock")
	if err != nil {
		return nil, err
	}
	defer turn.Close()
	rw, err := openLock("replab-tests.lock")
	if err != nil {
		return nil, err
	}
	how := syscall.LOCK_SH
	if m == exclusive {
		how = syscall.LOCK_EX
	}
	start := time.Now()
	waited := false
	for _, step := range []struct {
		f   *os.File
		how int
	}{{turn, syscall.LOCK_EX}, {rw, how}} {
		if flock(step.f, step.how|syscall.LOCK_NB) == nil {
			continue
		}
		waited = true
		if err := flock(step.f, step.how); err != nil {
			rw.Close()
			return nil, err
		}
	}
	if waited {
		what := "a test that measures time to finish"
		if m == exclusive {
			what = "the other integration tests to finish, to measure time alone"
		}
		logf("testkit: waited %.1f s for %s", time.Since(start).Seconds(), what)
	}
	if m == exclusive {
		waitQuiet(logf) // still holding the turnstile: nothing starts meanwhile
	}
	return rw, nil // the turnstile is let go by its Close
}

func openLock(name string) (*os.File, error) {
	return os.OpenFile(filepath.Join(lockDir, name), os.O_RDONLY|os.O_CREATE, 0o666)
}

func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
