package lab

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"replab/internal/linkem/emu"
	"replab/internal/linkem/pcap"
)

// Packet captures of link directions: pcap files written by the emulator
// (this process), either for the lab's whole life ([[link]] capture =
// true) or for a while on request over the control socket (replab
// capture). See emu.StartCapture for what is recorded and when.

// CaptureStatus is one capture, running or finished.
type CaptureStatus struct {
	Direction string `json:"direction"` // "a->b"
	File      string `json:"file"`
	Running   bool   `json:"running"`
	emu.CaptureStats
}

// labCapture is one capture of one direction into one file.
type labCapture struct {
	session string // control-socket session ("" for the spec's captures)
	dir     string // "a->b"
	path    string
	file    *os.File
	c       *emu.Capture

	done  bool // stopped and file closed
	final emu.CaptureStats
}

// captures are the lab's captures; stop holds the control-socket
// sessions still running, by id.
type captures struct {
	mu   sync.Mutex
	all  []*labCapture
	stop map[string]chan struct{}
	next int
}

// captureDir returns the directory capture files go to without -o,
// creating it. Options.CaptureDir, or DataRoot/LAB.captures: not the data
// directory, which is removed with the lab, and not a name any lab's data
// directory can have (lab names have no dot).
func (l *Lab) captureDir() (string, error) {
	dir := l.capDir
	if dir == "" {
		dir = filepath.Join(l.dataRoot, l.Spec.Lab.Name+".captures")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create capture directory: %w", err)
	}
	return dir, nil
}

// CaptureFileName is the file of a direction's capture for the lab's life.
func CaptureFileName(from, to string) string { return "capture-" + from + "-" + to + ".pcap" }

// startSpecCaptures starts the captures of links with capture = true.
func (l *Lab) startSpecCaptures() error {
	names := map[string]string{} // file name -> direction: "a-b"+"c" and "a"+"b-c" clash
	var dirs [][2]string
	var snaps []int
	for _, lk := range l.Spec.Links {
		if !lk.Capture {
			continue
		}
		for _, d := range [][2]string{{lk.A, lk.B}, {lk.B, lk.A}} {
			n := CaptureFileName(d[0], d[1])
			if other, dup := names[n]; dup {
				return fmt.Errorf("captures of %s and %s->%s would both be written to %s: rename a site", other, d[0], d[1], n)
			}
			names[n] = d[0] + "->" + d[1]
			dirs = append(dirs, d)
			snaps = append(snaps, lk.CaptureBytes)
		}
	}
	if len(dirs) == 0 {
		return nil
	}
	dir, err := l.captureDir()
	if err != nil {
		return err
	}
	for i, d := range dirs {
		path := filepath.Join(dir, CaptureFileName(d[0], d[1]))
		if _, err := l.startCapture("", d[0], d[1], path, os.O_TRUNC, snaps[i]); err != nil {
			return err
		}
		fmt.Fprintf(l.log, "capturing %s->%s to %s\n", d[0], d[1], path)
	}
	return nil
}

// startCapture starts one direction into path (created; excl is
// os.O_EXCL to refuse an existing file or os.O_TRUNC to replace it).
func (l *Lab) startCapture(session, from, to, path string, excl, snap int) (*labCapture, error) {
	if l.emu == nil {
		return nil, errors.New("an offline lab has no links to capture")
	}
	if _, err := l.emu.Params(from, to); err != nil {
		return nil, fmt.Errorf("%w (links: %s)", err, strings.Join(l.linkNames(), ", "))
	}
	if other := l.runningCapture(from + "->" + to); other != "" {
		// Before a file is created or truncated.
		return nil, fmt.Errorf("%s->%s is %w into %s", from, to, emu.ErrCapturing, other)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|excl, 0o644)
	base := strings.TrimSuffix(path, ".pcap")
	for i := 2; excl == os.O_EXCL && errors.Is(err, os.ErrExist) && i < 100; i++ {
		// A generated name taken (a capture earlier in the same second).
		path = fmt.Sprintf("%s-%d.pcap", base, i)
		f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|excl, 0o644)
	}
	if err != nil {
		return nil, fmt.Errorf("capture %s->%s: %w", from, to, err)
	}
	c, err := l.emu.StartCapture(from, to, f, snap)
	if err != nil {
		f.Close()
		if excl == os.O_EXCL {
			os.Remove(path) // ours and empty
		}
		if errors.Is(err, emu.ErrCapturing) {
			if other := l.runningCapture(from + "->" + to); other != "" {
				err = fmt.Errorf("%w into %s", err, other)
			}
		}
		return nil, err
	}
	lc := &labCapture{session: session, dir: from + "->" + to, path: path, file: f, c: c}
	l.caps.mu.Lock()
	l.caps.all = append(l.caps.all, lc)
	l.caps.mu.Unlock()
	return lc, nil
}

// runningCapture returns the file a running capture of dir writes, or "".
func (l *Lab) runningCapture(dir string) string {
	l.caps.mu.Lock()
	defer l.caps.mu.Unlock()
	for _, lc := range l.caps.all {
		if lc.dir == dir && !lc.done {
			return lc.path
		}
	}
	return ""
}

// finish stops a capture and closes its file; the caller holds caps.mu.
func (l *Lab) finish(lc *labCapture) error {
	if lc.done {
		return nil
	}
	lc.done = true
	st, err := lc.c.Stop()
	lc.final = st
	if cerr := lc.file.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close capture %s: %w", lc.path, cerr)
	}
	msg := fmt.Sprintf("capture %s: %d packets in %s", lc.dir, st.Packets, lc.path)
	if st.DroppedRecords > 0 {
		msg += fmt.Sprintf(" (%d packets not recorded: the capture writer fell behind)", st.DroppedRecords)
	}
	fmt.Fprintln(l.log, msg)
	return err
}

func (lc *labCapture) status() CaptureStatus {
	cs := CaptureStatus{Direction: lc.dir, File: lc.path, Running: !lc.done, CaptureStats: lc.final}
	if !lc.done {
		cs.CaptureStats = lc.c.Stats()
	}
	return cs
}

// stopCaptures ends every capture (at Close).
func (l *Lab) stopCaptures() error {
	l.caps.mu.Lock()
	defer l.caps.mu.Unlock()
	var errs []error
	for _, lc := range l.caps.all {
		errs = append(errs, l.finish(lc))
	}
	return errors.Join(errs...)
}

// Captures returns every capture of the lab, running or finished, in the
// order they started.
func (l *Lab) Captures() []CaptureStatus {
	l.caps.mu.Lock()
	defer l.caps.mu.Unlock()
	var out []CaptureStatus
	for _, lc := range l.caps.all {
		out = append(out, lc.status())
	}
	return out
}

// CaptureRequest is the body of POST /capture: capture From->To (and
// To->From with Both) until For has passed (0: until stopped), into Path
// (absolute; a directory when Both; "" = the lab's capture directory).
type CaptureRequest struct {
	From      string        `json:"from"`
	To        string        `json:"to"`
	Both      bool          `json:"both"`
	Path      string        `json:"path,omitempty"`
	SnapBytes int           `json:"snap_bytes,omitempty"`
	For       time.Duration `json:"for_ns,omitempty"`
}

// StartSession starts the captures of a request and returns their
// session id, for StopSession, and their files. Nothing is left running
// or created when it fails.
func (l *Lab) StartSession(req CaptureRequest) (string, []CaptureStatus, error) {
	if req.SnapBytes != 0 && (req.SnapBytes < pcap.MinSnapLen || req.SnapBytes > pcap.MaxSnapLen) {
		return "", nil, fmt.Errorf("snap length %d: want %d to %d bytes", req.SnapBytes, pcap.MinSnapLen, pcap.MaxSnapLen)
	}
	if req.For < 0 {
		return "", nil, fmt.Errorf("capture duration %s is negative", req.For)
	}
	if req.Path != "" && !filepath.IsAbs(req.Path) {
		return "", nil, fmt.Errorf("capture path %q is not absolute", req.Path)
	}
	dirs := [][2]string{{req.From, req.To}}
	if req.Both {
		dirs = append(dirs, [2]string{req.To, req.From})
	}
	for _, d := range dirs { // every direction exists and is free before a file is created
		if l.emu == nil {
			return "", nil, errors.New("an offline lab has no links to capture")
		}
		if _, err := l.emu.Params(d[0], d[1]); err != nil {
			return "", nil, fmt.Errorf("%w (links: %s)", err, strings.Join(l.linkNames(), ", "))
		}
		if other := l.runningCapture(d[0] + "->" + d[1]); other != "" {
			return "", nil, fmt.Errorf("%s->%s is %w into %s", d[0], d[1], emu.ErrCapturing, other)
		}
	}
	stamp := time.Now().Format("20060102-150405")
	paths := make([]string, len(dirs))
	for i, d := range dirs {
		switch {
		case req.Path != "" && !req.Both:
			paths[i] = req.Path
		default:
			dir := req.Path
			if dir == "" {
				var err error
				if dir, err = l.captureDir(); err != nil {
					return "", nil, err
				}
			} else if err := os.MkdirAll(dir, 0o755); err != nil {
				return "", nil, fmt.Errorf("create capture directory: %w", err)
			}
			paths[i] = filepath.Join(dir, strings.TrimSuffix(CaptureFileName(d[0], d[1]), ".pcap")+"-"+stamp+".pcap")
		}
	}
	l.caps.mu.Lock()
	l.caps.next++
	id := strconv.Itoa(l.caps.next)
	l.caps.mu.Unlock()
	var started []*labCapture
	for i, d := range dirs {
		// -o FILE replaces FILE, as tcpdump -w does; a generated name never
		// replaces an earlier capture.
		excl := os.O_EXCL
		if req.Path != "" && !req.Both {
			excl = os.O_TRUNC
		}
		lc, err := l.startCapture(id, d[0], d[1], paths[i], excl, req.SnapBytes)
		if err != nil {
			// Undo: no file, no entry in the list.
			l.caps.mu.Lock()
			for _, s := range started {
				if !s.done { // Close may have finished it meanwhile
					s.done = true
					_, _ = s.c.Stop()
					s.file.Close()
					os.Remove(s.path)
				}
			}
			keep := l.caps.all[:0]
			for _, lc := range l.caps.all {
				if lc.session != id {
					keep = append(keep, lc)
				}
			}
			l.caps.all = keep
			l.caps.mu.Unlock()
			return "", nil, err
		}
		started = append(started, lc)
	}
	l.caps.mu.Lock()
	if l.caps.stop == nil {
		l.caps.stop = map[string]chan struct{}{}
	}
	l.caps.stop[id] = make(chan struct{})
	var out []CaptureStatus
	for _, lc := range started {
		out = append(out, lc.status())
	}
	l.caps.mu.Unlock()
	return id, out, nil
}

// sessionStopped returns the channel StopSession closes (nil if unknown).
func (l *Lab) sessionStopped(id string) <-chan struct{} {
	l.caps.mu.Lock()
	defer l.caps.mu.Unlock()
	return l.caps.stop[id]
}

// RequestStop asks the session's waiter (the POST /capture handler) to end it.
func (l *Lab) RequestStop(id string) error {
	l.caps.mu.Lock()
	defer l.caps.mu.Unlock()
	ch, ok := l.caps.stop[id]
	if !ok {
		return fmt.Errorf("no running capture session %q", id)
	}
	select {
	case <-ch:
	default:
		close(ch)
	}
	return nil
}

// StopSession ends a session's captures, closes their files and returns
// their final counts.
func (l *Lab) StopSession(id string) ([]CaptureStatus, error) {
	l.caps.mu.Lock()
	defer l.caps.mu.Unlock()
	delete(l.caps.stop, id)
	var out []CaptureStatus
	var errs []error
	for _, lc := range l.caps.all {
		if lc.session == id {
			errs = append(errs, l.finish(lc))
			out = append(out, lc.status())
		}
	}
	return out, errors.Join(errs...)
}
