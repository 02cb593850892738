package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"replab/internal/linkem"
	"replab/internal/spec"
)

// Faults made from a second shell (replab fault, replab link set) reach
// the lab through its control socket. The lab applies link changes itself;
// node actions go to the handler that the process holding the servers
// registered (SetNodeControl). Every one is kept in the lab's fault log
// with its wall-clock time, and written as a line to FaultLogPath.

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

// NodeControlFunc performs do (one of spec.FaultDos) on a node, or with
// stage on one of its replication stages.
type NodeControlFunc func(ctx context.Context, node, stage, do string) error

// NodeRequest is the body of POST /node. With Heal, the lab undoes Do
// instead: kill and stop are healed by start, pause by resume.
type NodeRequest struct {
	Node string `json:"node"`
	// Stage, when set, is one of the node's replication stages (the
	// pipeline's extract, pump, collector, replicat) to act on.
	Stage string `json:"stage,omitempty"`
	Do    string `json:"do"`
	Heal  bool   `json:"heal,omitempty"`
}

// LinkFault is the answer to POST /link/fault: the change is applied and
// the previous parameters are kept under ID until POST /link/heal.
type LinkFault struct {
	ID     string      `json:"id"`
	Record FaultRecord `json:"record"`
	Status Status      `json:"status"`
}

// LinkHeal is the body of POST /link/heal.
type LinkHeal struct {
	ID string `json:"id"`
}

// errNoServers: no process registered a node handler.
var errNoServers = errors.New("this lab has no servers: start one whose spec has [[node]]s (replab lab up FILE)")

// faultLog holds the lab's fault records and open link faults.
type faultLog struct {
	mu      sync.Mutex
	path    string
	file    *os.File
	records []FaultRecord
	nodeCtl NodeControlFunc

	// linkMu orders link changes made through the control socket, so a
	// link fault's saved parameters are exactly what it replaced.
	linkMu sync.Mutex
	saved  map[int]*savedLink // open link faults by id, under linkMu
	nextID int
}

// savedLink is what a link fault changed, to put back exactly.
type savedLink struct {
	what  string
	set   []string
	pairs [][2]string
	old   []linkem.Params
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

// SetNodeControl registers what performs node actions (POST /node); nil
// removes it (the servers are going away).
func (l *Lab) SetNodeControl(f NodeControlFunc) {
	l.faults.mu.Lock()
	defer l.faults.mu.Unlock()
	l.faults.nodeCtl = f
}

// NodeAction performs a node action (or heals it, see NodeRequest) through
// the registered handler and logs it. Requests that name no node of the
// lab or no action are refused without being logged.
func (l *Lab) NodeAction(ctx context.Context, req NodeRequest) (FaultRecord, error) {
	l.faults.mu.Lock()
	f := l.faults.nodeCtl
	l.faults.mu.Unlock()
	if f == nil {
		return FaultRecord{}, errNoServers
	}
	if !slices.Contains(spec.FaultDos, req.Do) {
		return FaultRecord{}, fmt.Errorf("unknown node action %q: use one of %s", req.Do, strings.Join(spec.FaultDos, ", "))
	}
	var names []string
	l.nodesMu.Lock()
	for _, n := range l.nodes {
		names = append(names, n.Name)
	}
	l.nodesMu.Unlock()
	if !slices.Contains(names, req.Node) {
		return FaultRecord{}, fmt.Errorf("lab %s has no node %q (nodes: %s)", l.Spec.Lab.Name, req.Node, strings.Join(names, ", "))
	}
	do, action := req.Do, FaultApply
	if req.Heal {
		h, err := HealOf(req.Do)
		if err != nil {
			return FaultRecord{}, err
		}
		do, action = h, FaultHeal
	}
	err := f(ctx, req.Node, req.Stage, do)
	what := "node " + req.Node + " " + req.Do
	if req.Stage != "" {
		what = "node " + req.Node + " " + req.Stage + " " + req.Do
	}
	rec := l.logFault(what, action, err)
	return rec, err
}

// HealOf is the node action that undoes do: start after kill or stop,
// resume after pause.
func HealOf(do string) (string, error) {
	if h := spec.FaultHeal(do); h != "" {
		return h, nil
	}
	return "", fmt.Errorf("node %s cannot be healed: only kill, stop (healed by start) and pause (healed by resume) last", do)
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
	l.faults.linkMu.Lock()
	defer l.faults.linkMu.Unlock()
	if _, _, err := l.setLink(req.From, req.To, req.Both, req.Set); err != nil {
		return err
	}
	l.logFault(linkWhat(req), FaultApply, nil)
	return nil
}

// LinkFault applies a link change like SetLink, logs it, and keeps the
// previous parameters of the directions it changed until HealLink.
func (l *Lab) LinkFault(req LinkRequest) (string, FaultRecord, error) {
	l.faults.linkMu.Lock()
	defer l.faults.linkMu.Unlock()
	pairs, old, err := l.setLink(req.From, req.To, req.Both, req.Set)
	if err != nil {
		return "", FaultRecord{}, err
	}
	what := linkWhat(req)
	rec := l.logFault(what, FaultApply, nil)
	if l.faults.saved == nil {
		l.faults.saved = map[int]*savedLink{}
	}
	l.faults.nextID++
	l.faults.saved[l.faults.nextID] = &savedLink{what: what, set: slices.Clone(req.Set), pairs: pairs, old: old}
	return strconv.Itoa(l.faults.nextID), rec, nil
}

// HealLink puts back exactly the parameters a LinkFault found (down
// included) and logs the heal. When later link faults on the same
// direction are still open, their changes are applied again on top of
// what comes back, and their own heals then restore what this one did:
// faults that overlap in time heal in any order to what was there before
// the first.
func (l *Lab) HealLink(id string) (FaultRecord, error) {
	l.faults.linkMu.Lock()
	defer l.faults.linkMu.Unlock()
	n, _ := strconv.Atoi(id)
	s, ok := l.faults.saved[n]
	if !ok {
		return FaultRecord{}, fmt.Errorf("no open link fault %q to heal (already healed?)", id)
	}
	delete(l.faults.saved, n)
	var later []int
	for m := range l.faults.saved {
		if m > n {
			later = append(later, m)
		}
	}
	slices.Sort(later)
	base := ""
	if l.Spec.File != "" {
		base = filepath.Dir(l.Spec.File)
	}
	var errs []error
	for i, pr := range s.pairs {
		p := s.old[i]
		for _, m := range later {
			f := l.faults.saved[m]
			for j, fp := range f.pairs {
				if fp != pr {
					continue
				}
				f.old[j] = p
				for _, kv := range f.set {
					if err := spec.ApplyKV(&p, kv, base); err != nil {
						errs = append(errs, fmt.Errorf("apply %s again: %w", f.what, err))
					}
				}
			}
		}
		if err := l.emu.SetParams(pr[0], pr[1], p); err != nil {
			errs = append(errs, fmt.Errorf("restore %s->%s: %w", pr[0], pr[1], err))
		}
	}
	err := errors.Join(errs...)
	return l.logFault(s.what, FaultHeal, err), err
}
