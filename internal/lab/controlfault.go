package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"replab/internal/faultkind"
	"replab/internal/linkem"
)

// nodeActionTimeout bounds one fault's apply or heal (a server's stop or
// start).
const nodeActionTimeout = 3 * time.Minute

// FaultApplied is the answer to POST /fault: the fault is applied and,
// when it has something to heal, kept under ID until POST /fault/heal.
type FaultApplied struct {
	ID     string      `json:"id,omitempty"` // "": nothing to heal (an instantaneous fault)
	Record FaultRecord `json:"record"`
	Status Status      `json:"status"`
}

// FaultHealRequest is the body of POST /fault/heal.
type FaultHealRequest struct {
	ID string `json:"id"`
}

// serveFaults adds the fault endpoints to the control socket:
//
//	POST /fault      faultkind.Order → FaultApplied (409 when a node fault finds no servers)
//	POST /fault/heal FaultHealRequest → FaultRecord (the fault is undone)
func (l *Lab) serveFaults(mux *http.ServeMux) {
	// A client that goes away (Ctrl-C) does not stop an action half-way.
	actx := func(r *http.Request) (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.WithoutCancel(r.Context()), nodeActionTimeout)
	}
	fail := func(w http.ResponseWriter, err error) {
		code := http.StatusBadRequest
		if errors.Is(err, errNoServers) {
			code = http.StatusConflict
		}
		writeJSON(w, code, apiError{err.Error()})
	}
	mux.HandleFunc("POST /fault", func(w http.ResponseWriter, r *http.Request) {
		var o faultkind.Order
		if !decode(w, r, &o) {
			return
		}
		ctx, cancel := actx(r)
		defer cancel()
		id, rec, err := l.Fault(ctx, o)
		if err != nil {
			fail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, FaultApplied{ID: id, Record: rec, Status: l.Status()})
	})
	mux.HandleFunc("POST /fault/heal", func(w http.ResponseWriter, r *http.Request) {
		var req FaultHealRequest
		if !decode(w, r, &req) {
			return
		}
		ctx, cancel := actx(r)
		defer cancel()
		rec, err := l.HealFault(ctx, req.ID)
		if err != nil {
			fail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, rec)
	})
}

// Fault applies a fault of any kind (faultkind) and logs it. What it acts
// on must be the lab's (a node of its servers, a direction of its links, a
// site), and the kind checks the rest against the lab as it is now; a
// fault refused so changes nothing and is not logged. One that fails while
// it acts is logged with its error. The returned id heals it (HealFault);
// "" when there is nothing to heal.
func (l *Lab) Fault(ctx context.Context, o faultkind.Order) (string, FaultRecord, error) {
	kinds := faultkind.Default()
	if k := kinds.Lookup(o.Kind); k == nil || k.On != o.Subject.On {
		return "", FaultRecord{}, fmt.Errorf("unknown %s fault %q: use one of %s", o.Subject.On, o.Kind, strings.Join(kinds.Names(o.Subject.On), ", "))
	}
	if err := l.checkSubject(o.Subject); err != nil {
		return "", FaultRecord{}, err
	}
	links := o.Subject.On != faultkind.OnNode
	if links {
		l.faults.applyMu.Lock()
		defer l.faults.applyMu.Unlock()
	}
	_, f, err := o.Parse(kinds, faultSpec{l})
	if err != nil {
		return "", FaultRecord{}, err
	}
	l.faults.linkMu.Lock()
	l.faults.nextID++
	of := &openFault{id: l.faults.nextID, what: f.Describe(), on: o.Subject.On,
		before: map[[2]string]linkem.Params{}, changes: map[[2]string][]string{}}
	l.faults.linkMu.Unlock()
	w := faultWorld{l, of}
	of.heal, err = f.Apply(ctx, w)
	rec := l.logFault(of.what, FaultApply, err)
	if err != nil {
		return "", rec, err
	}
	st, steps := f.(faultkind.Stepper)
	if of.heal == nil && !steps {
		return "", rec, nil
	}
	l.faults.linkMu.Lock()
	if l.faults.open == nil {
		l.faults.open = map[int]*openFault{}
	}
	l.faults.open[of.id] = of
	l.faults.linkMu.Unlock()
	if steps {
		of.stop, of.done = make(chan struct{}), make(chan struct{})
		go l.runSteps(st, w, time.Now())
	}
	return strconv.Itoa(of.id), rec, nil
}

// checkSubject says what a fault names that the lab does not have.
func (l *Lab) checkSubject(sub faultkind.Subject) error {
	switch sub.On {
	case faultkind.OnNode:
		l.faults.mu.Lock()
		ctl := l.faults.nodeCtl
		l.faults.mu.Unlock()
		if ctl == nil {
			return errNoServers
		}
		var names []string
		l.nodesMu.Lock()
		for _, n := range l.nodes {
			names = append(names, n.Name)
		}
		l.nodesMu.Unlock()
		if !slices.Contains(names, sub.Node) && sub.Node != faultkind.PrimaryNode {
			return fmt.Errorf("lab %s has no node %q (nodes: %s)", l.Spec.Lab.Name, sub.Node, strings.Join(names, ", "))
		}
	case faultkind.OnLink:
		for _, d := range sub.Directions() {
			if _, err := l.emu.Params(d[0], d[1]); err != nil {
				return fmt.Errorf("%w (links: %s)", err, strings.Join(l.linkNames(), ", "))
			}
		}
	case faultkind.OnSite:
		var names []string
		if sub.Site == faultkind.PrimaryNode {
			return nil
		}
		for _, s := range l.Spec.Sites {
			if s.Name == sub.Site {
				return nil
			}
			names = append(names, s.Name)
		}
		return fmt.Errorf("lab %s has no site %q (sites: %s)", l.Spec.Lab.Name, sub.Site, strings.Join(names, ", "))
	default:
		return fmt.Errorf("a fault acts on a link, a node or a site, not %q", sub.On)
	}
	return nil
}

// runSteps does a stepping fault's steps (a flapping link's) at their
// times after start, until it is healed or the lab closes.
func (l *Lab) runSteps(st faultkind.Stepper, w faultWorld, start time.Time) {
	of := w.f
	defer close(of.done)
	for i, off := range st.Steps() {
		t := time.NewTimer(time.Until(start.Add(off)))
		select {
		case <-of.stop:
			t.Stop()
			return
		case <-l.closing:
			t.Stop()
			return
		case <-t.C:
		}
		l.faults.applyMu.Lock()
		select {
		case <-of.stop: // healed meanwhile
			l.faults.applyMu.Unlock()
			return
		default:
		}
		err := st.Step(context.Background(), w, i)
		l.faults.applyMu.Unlock()
		if err != nil {
			l.faults.linkMu.Lock()
			of.stepErrs = append(of.stepErrs, fmt.Sprintf("step %s after the fault: %v", off, err))
			l.faults.linkMu.Unlock()
		}
	}
}

// HealFault undoes a fault that Fault applied and logs the heal; a step
// that failed meanwhile is in the heal's error.
func (l *Lab) HealFault(ctx context.Context, id string) (FaultRecord, error) {
	n, _ := strconv.Atoi(id)
	l.faults.linkMu.Lock()
	of := l.faults.open[n]
	delete(l.faults.open, n)
	l.faults.linkMu.Unlock()
	if of == nil {
		return FaultRecord{}, fmt.Errorf("no fault %q in effect to heal (already healed?)", id)
	}
	if of.stop != nil {
		close(of.stop)
		<-of.done
	}
	var err error
	if of.heal != nil {
		if of.on != faultkind.OnNode {
			l.faults.applyMu.Lock()
			err = of.heal(ctx)
			l.faults.applyMu.Unlock()
		} else {
			err = of.heal(ctx)
		}
	}
	l.faults.linkMu.Lock()
	if len(of.stepErrs) > 0 {
		err = errors.Join(err, errors.New(strings.Join(of.stepErrs, "; ")))
	}
	l.faults.linkMu.Unlock()
	return l.logFault(of.what, FaultHeal, err), err
}

func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(v); err != nil {
		writeJSON(w, http.StatusBadRequest, apiError{"bad request: " + err.Error()})
		return false
	}
	return true
}

// long is the client for a fault's apply or heal, which waits however
// long the action takes (up to a few minutes).
func (c *Client) long() *Client {
	return &Client{Name: c.Name, hc: &http.Client{Transport: c.hc.Transport, Timeout: nodeActionTimeout + 10*time.Second}}
}

// Fault applies a fault (POST /fault).
func (c *Client) Fault(o faultkind.Order) (FaultApplied, error) {
	var ans FaultApplied
	b, _ := json.Marshal(o)
	err := c.long().do("POST", "/fault", b, &ans)
	return ans, err
}

// HealFault undoes the fault Fault applied as id (POST /fault/heal).
func (c *Client) HealFault(id string) (FaultRecord, error) {
	var rec FaultRecord
	b, _ := json.Marshal(FaultHealRequest{ID: id})
	err := c.long().do("POST", "/fault/heal", b, &rec)
	return rec, err
}
