package faultkind

import (
	"fmt"
	"slices"
)

// Registry is a set of kinds by name, in the order they were added.
type Registry struct {
	kinds []*Kind
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{} }

// Add registers k. It refuses a kind without a name, a subject or a Parse,
// and a name already taken: do names one kind.
func (r *Registry) Add(k Kind) error {
	switch {
	case k.Name == "":
		return fmt.Errorf("fault kind without a name")
	case k.On != OnLink && k.On != OnNode && k.On != OnSite:
		return fmt.Errorf("fault kind %s acts on %q: want %s, %s or %s", k.Name, k.On, OnLink, OnNode, OnSite)
	case k.Parse == nil:
		return fmt.Errorf("fault kind %s has no Parse", k.Name)
	case r.Lookup(k.Name) != nil:
		return fmt.Errorf("fault kind %s is registered twice", k.Name)
	}
	r.kinds = append(r.kinds, &k)
	return nil
}

// Lookup returns the kind named name, or nil.
func (r *Registry) Lookup(name string) *Kind {
	for _, k := range r.kinds {
		if k.Name == name {
			return k
		}
	}
	return nil
}

// On lists the kinds that act on subject (OnLink, …), in the order they
// were added.
func (r *Registry) On(subject string) []*Kind {
	var out []*Kind
	for _, k := range r.kinds {
		if k.On == subject {
			out = append(out, k)
		}
	}
	return out
}

// Names lists the names of the kinds that act on subject that do can name
// (SetName is given with set, not do).
func (r *Registry) Names(subject string) []string {
	var out []string
	for _, k := range r.On(subject) {
		if k.Name != SetName {
			out = append(out, k.Name)
		}
	}
	return out
}

// Keys lists every kind's own keys, once each, in the order the kinds were
// added.
func (r *Registry) Keys() []string {
	var out []string
	for _, k := range r.kinds {
		for _, key := range k.Keys {
			if !slices.Contains(out, key.Name) {
				out = append(out, key.Name)
			}
		}
	}
	return out
}

// KeyOf returns the first kind that takes key, or nil.
func (r *Registry) KeyOf(key string) *Kind {
	for _, k := range r.kinds {
		if slices.ContainsFunc(k.Keys, func(x Key) bool { return x.Name == key }) {
			return k
		}
	}
	return nil
}

// Clone is a copy of r to which more kinds can be added (tests).
func (r *Registry) Clone() *Registry { return &Registry{kinds: slices.Clone(r.kinds)} }

// kinds is every kind this binary knows: each kind's file registers it.
var kinds = NewRegistry()

// Register adds k to the kinds every part of replab uses; a kind's file
// calls it from init. It panics on a kind Add refuses (a duplicate name).
func Register(k Kind) {
	if err := kinds.Add(k); err != nil {
		panic(err)
	}
}

// Default is the registry of every kind this binary knows.
func Default() *Registry { return kinds }
