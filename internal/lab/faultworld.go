package lab

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"replab/internal/faultkind"
	"replab/internal/linkem"
	"replab/internal/spec"
)

// The world of faults made through the control socket: the lab's links
// and the registered node handler (faultkind.World), and the lab as a
// kind checks a fault against it (faultkind.Spec).

// openFault is a fault applied through the control socket and not healed.
type openFault struct {
	id   int
	what string
	on   string // what it acts on (faultkind.OnLink, …)
	heal faultkind.Heal
	// before is what each direction it changed had before it, and changes
	// what it changed there since (in link set's words), for applying its
	// changes again when an earlier fault on the direction heals under it.
	before  map[[2]string]linkem.Params
	changes map[[2]string][]string
	// stop ends its steps (a flapping link's); done is closed when they
	// have ended. stepErrs are the steps that failed.
	stop, done chan struct{}
	stepErrs   []string
}

// faultWorld is the lab as one open fault acts on it.
type faultWorld struct {
	l *Lab
	f *openFault
}

var _ faultkind.World = faultWorld{}

// LinkParams reads a direction, remembering what it had before the fault.
func (w faultWorld) LinkParams(from, to string) (linkem.Params, error) {
	w.l.faults.linkMu.Lock()
	defer w.l.faults.linkMu.Unlock()
	p, err := w.l.emu.Params(from, to)
	if err != nil {
		return p, fmt.Errorf("%w (links: %s)", err, strings.Join(w.l.linkNames(), ", "))
	}
	if _, ok := w.f.before[[2]string{from, to}]; !ok {
		w.f.before[[2]string{from, to}] = p
	}
	return p, nil
}

// SetLink changes directions as replab link set does, remembering the
// changes.
func (w faultWorld) SetLink(from, to string, both bool, changes []string) error {
	w.l.faults.linkMu.Lock()
	defer w.l.faults.linkMu.Unlock()
	pairs, old, err := w.l.setLink(from, to, both, changes)
	if err != nil {
		return err
	}
	for i, pr := range pairs {
		if _, ok := w.f.before[pr]; !ok {
			w.f.before[pr] = old[i]
		}
		w.f.changes[pr] = addChanges(w.f.changes[pr], changes)
	}
	return nil
}

// RestoreLink puts back what the direction had before the fault (which
// an earlier fault's heal may have changed since), with the changes of
// faults applied after this one and still in effect applied again on top:
// faults that overlap in time heal in any order to what was there before
// the first.
func (w faultWorld) RestoreLink(from, to string, p linkem.Params) error {
	w.l.faults.linkMu.Lock()
	defer w.l.faults.linkMu.Unlock()
	d := [2]string{from, to}
	if b, ok := w.f.before[d]; ok {
		p = b
	}
	delete(w.f.changes, d)
	var later []int
	for id, o := range w.l.faults.open {
		if id > w.f.id && len(o.changes[d]) > 0 {
			later = append(later, id)
		}
	}
	slices.Sort(later)
	var errs []error
	for _, id := range later {
		o := w.l.faults.open[id]
		o.before[d] = p
		for _, kv := range o.changes[d] {
			if err := spec.ApplyKV(&p, kv, w.l.specDir()); err != nil {
				errs = append(errs, fmt.Errorf("apply %s again: %w", o.what, err))
			}
		}
	}
	if err := w.l.emu.SetParams(from, to, p); err != nil {
		errs = append(errs, fmt.Errorf("restore %s->%s: %w", from, to, err))
	}
	return errors.Join(errs...)
}

// addChanges appends changes to what a fault changed on a direction. The
// bare words down and up set only whether it is down, so a new one
// replaces those before it (a flapping link's record stays short).
func addChanges(list, changes []string) []string {
	updown := func(s string) bool { s = strings.TrimSpace(s); return s == "down" || s == "up" }
	for _, c := range changes {
		if updown(c) {
			list = slices.DeleteFunc(list, updown)
		}
		list = append(list, c)
	}
	return list
}

// nodes is the registered node handler, or errNoServers.
func (w faultWorld) nodes() (faultkind.Nodes, error) {
	w.l.faults.mu.Lock()
	defer w.l.faults.mu.Unlock()
	if w.l.faults.nodeCtl == nil {
		return nil, errNoServers
	}
	return w.l.faults.nodeCtl, nil
}

func (w faultWorld) node(ctx context.Context, node string, do func(faultkind.Nodes, context.Context, string) error) error {
	n, err := w.nodes()
	if err != nil {
		return err
	}
	return do(n, ctx, node)
}

func (w faultWorld) Kill(ctx context.Context, node string) error {
	return w.node(ctx, node, faultkind.Nodes.Kill)
}

func (w faultWorld) Stop(ctx context.Context, node string) error {
	return w.node(ctx, node, faultkind.Nodes.Stop)
}

func (w faultWorld) Start(ctx context.Context, node string) error {
	return w.node(ctx, node, faultkind.Nodes.Start)
}

func (w faultWorld) Restart(ctx context.Context, node string) error {
	return w.node(ctx, node, faultkind.Nodes.Restart)
}

func (w faultWorld) Pause(ctx context.Context, node string) error {
	return w.node(ctx, node, faultkind.Nodes.Pause)
}

func (w faultWorld) Resume(ctx context.Context, node string) error {
	return w.node(ctx, node, faultkind.Nodes.Resume)
}

func (w faultWorld) Promote(ctx context.Context, node string) error {
	return w.node(ctx, node, faultkind.Nodes.Promote)
}

// Primary implements faultkind.PrimaryFinder through the node handler.
func (w faultWorld) Primary(ctx context.Context) (string, string, error) {
	n, err := w.nodes()
	if err != nil {
		return "", "", err
	}
	pf, ok := n.(faultkind.PrimaryFinder)
	if !ok {
		return "", "", errors.New("this lab's servers cannot say which node takes writes")
	}
	return pf.Primary(ctx)
}

func (w faultWorld) Stage(ctx context.Context, node, stage, action string) error {
	n, err := w.nodes()
	if err != nil {
		return err
	}
	return n.Stage(ctx, node, stage, action)
}

// faultSpec is the lab as a kind checks a fault against it: its links as
// they are now.
type faultSpec struct{ l *Lab }

func (v faultSpec) Links() [][2]string {
	var out [][2]string
	for _, lk := range v.l.Spec.Links {
		out = append(out, [2]string{lk.A, lk.B})
	}
	return out
}

func (v faultSpec) Direction(from, to string) (linkem.Params, bool) {
	if v.l.emu == nil {
		return linkem.Params{}, false
	}
	v.l.faults.linkMu.Lock()
	defer v.l.faults.linkMu.Unlock()
	p, err := v.l.emu.Params(from, to)
	return p, err == nil
}

func (v faultSpec) Change(p *linkem.Params, change string) error {
	return spec.ApplyKV(p, change, v.l.specDir())
}

// specDir is where the spec's relative paths (traces) start.
func (l *Lab) specDir() string {
	if l.Spec.File == "" {
		return ""
	}
	return filepath.Dir(l.Spec.File)
}
