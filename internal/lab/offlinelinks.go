package lab

import (
	"fmt"
	"sync"

	"replab/internal/linkem"
	"replab/internal/spec"
)

// linkTable holds the running links' parameters: the emulator, or in an
// offline lab a table of them.
type linkTable interface {
	Params(from, to string) (linkem.Params, error)
	SetParams(from, to string, p linkem.Params) error
}

// offlineLinks are an offline lab's links: no packet crosses them, but
// they can be set as a running lab's are (link set, Shape, a link search)
// and read back with LinkParams — by an in-process engine that models its
// replication across them (the fake).
type offlineLinks struct {
	mu sync.Mutex
	p  map[[2]string]linkem.Params
}

func newOfflineLinks(s *spec.Spec) *offlineLinks {
	o := &offlineLinks{p: map[[2]string]linkem.Params{}}
	for _, lk := range s.Links {
		o.p[[2]string{lk.A, lk.B}] = lk.Forward
		o.p[[2]string{lk.B, lk.A}] = lk.Reverse
	}
	return o
}

func (o *offlineLinks) Params(from, to string) (linkem.Params, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	p, ok := o.p[[2]string{from, to}]
	if !ok {
		return linkem.Params{}, fmt.Errorf("no link %s->%s", from, to)
	}
	return p, nil
}

func (o *offlineLinks) SetParams(from, to string, p linkem.Params) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	k := [2]string{from, to}
	if _, ok := o.p[k]; !ok {
		return fmt.Errorf("no link %s->%s", from, to)
	}
	o.p[k] = p
	return nil
}

// links is what holds the lab's link parameters; nil only before Up.
func (l *Lab) links() linkTable {
	if l.emu != nil {
		return l.emu
	}
	if l.offline != nil {
		return l.offline
	}
	return nil
}

// LinkParams returns the current parameters of the direction from->to of
// a direct link (the spec's, or as link set changed them), in a lab with
// an emulator or an offline one.
func (l *Lab) LinkParams(from, to string) (linkem.Params, error) {
	t := l.links()
	if t == nil {
		return linkem.Params{}, fmt.Errorf("no link %s->%s: the lab has no links", from, to)
	}
	return t.Params(from, to)
}
