package lab

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"replab/internal/faultkind"
)

// Faults made from a second shell (replab fault, replab link set) reach
// the lab through its control socket. Any kind of fault (internal/faultkind)
// is applied through the lab's world (faultworld.go): link changes by the
// lab itself, node actions by the handler that the process holding the
// servers registered (SetNodeControl). Every one is kept in the lab's fault
// log with its wall-clock time, and written as a line to FaultLogPath.

// Fault record actions (the same words as fault.ActionApply and
// fault.ActionHeal).
const (
	FaultApply = "apply"
	FaultHeal  = "heal"
)

// FaultRecord is one fault applied or healed through the control socket.
type FaultRecord struct {
	Time   time.Time `json:"time"`
	What   string    `json:"what"`   // "link primary<->eu set down", "node e1 kill"
	Action string    `json:"action"` // FaultApply or FaultHeal
	Err    string    `json:"error,omitempty"`
}

// String is the record's line in the fault log file.
func (r FaultRecord) String() string {
	s := r.Time.UTC().Format("2006-01-02T15:04:05.000000Z") + " " + r.Action + " " + r.What
	if r.Err != "" {
		s += " error: " + strings.ReplaceAll(r.Err, "\n", " ")
	}
	return s
}

// errNoServers: no process registered a node handler.
var errNoServers = errors.New("this lab has no servers: start one whose spec has [[node]]s (replab lab up FILE)")

// faultLog holds the lab's fault records and the faults in effect.
type faultLog struct {
	mu      sync.Mutex
	path    string
	file    *os.File
	records []FaultRecord
	nodeCtl faultkind.Nodes

	// applyMu orders the faults that change links (their apply, steps and
	// heal) and replab link set, so that what a fault saves is exactly
	// what it replaced.
	applyMu sync.Mutex
	// linkMu guards open and every change of a link's parameters.
	linkMu sync.Mutex
	open   map[int]*openFault // faults in effect by id
	nextID int
}

// FaultLogPath is where a lab's fault log is written: next to its state
// directory, so that it outlives the lab (`replab lab down` leaves it; the
// next `lab up` of the same name starts it anew). A lab that had no fault
// removes it when it closes.
func FaultLogPath(root, name string) string {
	if root == "" {
		root = DefaultStateRoot
	}
	return filepath.Join(root, name+".faults.log")
}

// openFaultLog starts the lab's fault log file (empty), for a lab with a
// control socket: faults come only through it.
func (l *Lab) openFaultLog() error {
	p := FaultLogPath(l.root, l.Spec.Lab.Name)
	f, err := os.OpenFile(p, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("fault log: %w", err)
	}
	l.faults.mu.Lock()
	l.faults.path, l.faults.file = p, f
	l.faults.mu.Unlock()
	return nil
}

// closeFaultLog closes the fault log; an empty one is removed (a lab
// without faults leaves nothing behind).
func (l *Lab) closeFaultLog() {
	l.faults.mu.Lock()
	defer l.faults.mu.Unlock()
	if l.faults.file != nil {
		_ = l.faults.file.Close()
		l.faults.file = nil
		if len(l.faults.records) == 0 {
			_ = os.Remove(l.faults.path)
		}
	}
}

// FaultLogFile is the file the lab writes its fault log to ("" when none).
func (l *Lab) FaultLogFile() string {
	l.faults.mu.Lock()
	defer l.faults.mu.Unlock()
	return l.faults.path
}

// FaultLog returns every fault applied or healed through the control
// socket so far, in order.
func (l *Lab) FaultLog() []FaultRecord {
	l.faults.mu.Lock()
	defer l.faults.mu.Unlock()
	return slices.Clone(l.faults.records)
}

// logFault records a fault now; it returns the record.
func (l *Lab) logFault(what, action string, err error) FaultRecord {
	r := FaultRecord{Time: time.Now().UTC(), What: what, Action: action}
	if err != nil {
		r.Err = err.Error()
	}
	l.faults.mu.Lock()
	defer l.faults.mu.Unlock()
	// Times only increase, even if the wall clock steps back.
	if n := len(l.faults.records); n > 0 && !r.Time.After(l.faults.records[n-1].Time) {
		r.Time = l.faults.records[n-1].Time.Add(time.Microsecond)
	}
	l.faults.records = append(l.faults.records, r)
	if l.faults.file != nil {
		if _, werr := l.faults.file.WriteString(r.String() + "\n"); werr != nil {
			fmt.Fprintf(l.log, "fault log %s: %v\n", l.faults.path, werr)
		}
	}
	return r
}

// SetNodeControl registers what performs node actions (faults on nodes);
// nil removes it (the servers are going away).
func (l *Lab) SetNodeControl(n faultkind.Nodes) {
	l.faults.mu.Lock()
	defer l.faults.mu.Unlock()
	l.faults.nodeCtl = n
}

// linkWhat names a link change in the fault log: "link a<->b set down".
func linkWhat(req LinkRequest) string {
	arrow := "->"
	if req.Both {
		arrow = "<->"
	}
	return "link " + req.From + arrow + req.To + " set " + strings.Join(req.Set, " ")
}

// setLinkLogged is POST /link: SetLink, logged when it changed something.
func (l *Lab) setLinkLogged(req LinkRequest) error {
	l.faults.applyMu.Lock()
	defer l.faults.applyMu.Unlock()
	l.faults.linkMu.Lock()
	_, _, err := l.setLink(req.From, req.To, req.Both, req.Set)
	l.faults.linkMu.Unlock()
	if err != nil {
		return err
	}
	l.logFault(linkWhat(req), FaultApply, nil)
	return nil
}
