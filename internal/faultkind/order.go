package faultkind

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Order is a fault as replab fault gives it, and as the command sends it
// to a lab's control socket: its kind, subject and keys as the command
// line wrote them, and how long until it is healed.
type Order struct {
	Kind    string         `json:"kind"`
	Subject Subject        `json:"subject"`
	Keys    map[string]any `json:"keys,omitempty"` // set: a list of strings; every, down: "2s"
	For     time.Duration  `json:"for,omitempty"`  // 0: not healed by the command
}

// Parse makes the order's fault with reg's kinds, checked against s (nil:
// the form only). The error holds every problem found, on one line.
func (o Order) Parse(reg *Registry, s Spec) (*Kind, Fault, error) {
	k := reg.Lookup(o.Kind)
	if k == nil {
		return nil, nil, fmt.Errorf("unknown fault %q", o.Kind)
	}
	if k.On != o.Subject.On {
		return k, nil, fmt.Errorf("%s acts on a %s, not a %s", k.Name, k.On, o.Subject.On)
	}
	r := &orderReader{o: o}
	f := k.Parse(r, o.Subject, s)
	if len(r.errs) > 0 {
		return k, nil, errors.New(strings.Join(r.errs, "; "))
	}
	if f == nil {
		return k, nil, fmt.Errorf("%s: not a fault", o.Kind)
	}
	return k, f, nil
}

// orderReader reads an Order for a kind's Parse.
type orderReader struct {
	o    Order
	errs []string
}

func (r *orderReader) Has(key string) bool {
	switch key {
	case "do":
		return r.o.Kind != SetName
	case "for":
		return r.o.For != 0
	}
	_, ok := r.o.Keys[key]
	return ok
}

func (r *orderReader) Value(key string) any {
	if key == "do" && r.o.Kind != SetName {
		return r.o.Kind
	}
	return r.o.Keys[key]
}

func (r *orderReader) String(key, want string) (string, bool) {
	v := r.Value(key)
	if v == nil {
		return "", false
	}
	s, ok := v.(string)
	if !ok {
		r.Fail(key, "want %s", want)
	}
	return s, ok
}

func (r *orderReader) Duration(key, want string) (time.Duration, bool) {
	s, ok := r.String(key, want)
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(strings.TrimSpace(s))
	switch {
	case err != nil:
		r.Fail(key, "not a duration; want %s", want)
		return 0, false
	case d < 0:
		r.Fail(key, "must not be negative")
		return 0, false
	}
	return d, true
}

func (r *orderReader) For() (time.Duration, bool) { return r.o.For, r.o.For > 0 }

// flag is how the command line gives key: as --key, or "" for a key that
// is its words (the subject, do, set).
func flag(key string) string {
	switch key {
	case "", "do", "set", OnLink, OnNode, OnSite, "stage":
		return ""
	}
	return "--" + key
}

func (r *orderReader) Fail(key, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if f := flag(key); f != "" {
		msg = fmt.Sprintf("%s %v: %s", f, r.Value(key), msg)
	}
	r.errs = append(r.errs, msg)
}

func (r *orderReader) FailAt(key, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if f := flag(key); f != "" {
		msg = f + ": " + msg
	}
	r.errs = append(r.errs, msg)
}
