package faultkind

import (
	"reflect"
	"strings"
	"testing"
)

func TestRegistryRefusesWhatDoCannotName(t *testing.T) {
	parse := func(Reader, Subject, Spec) Fault { return nil }
	r := NewRegistry()
	if err := r.Add(Kind{Name: "cut", On: OnSite, Parse: parse}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		k    Kind
		want string
	}{
		{"a name taken", Kind{Name: "cut", On: OnLink, Parse: parse}, "fault kind cut is registered twice"},
		{"no name", Kind{On: OnLink, Parse: parse}, "without a name"},
		{"an unknown subject", Kind{Name: "drain", On: "disk", Parse: parse}, `fault kind drain acts on "disk": want link, node or site`},
		{"no Parse", Kind{Name: "drain", On: OnNode}, "fault kind drain has no Parse"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := r.Add(tc.k); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Add: %v, want an error with %q", err, tc.want)
			}
		})
	}
	if got := len(r.On(OnSite)) + len(r.On(OnLink)) + len(r.On(OnNode)); got != 1 {
		t.Errorf("%d kinds after the refusals, want 1", got)
	}

	// The kinds every part of replab uses: Register refuses a second one
	// of a name by panicking at init.
	defer func() {
		if recover() == nil {
			t.Error("Register of a name taken did not panic")
		}
	}()
	Register(Kind{Name: "kill", On: OnNode, Parse: parse})
}

func TestDefaultKinds(t *testing.T) {
	r := Default()
	for on, want := range map[string][]string{
		OnNode: {"kill", "stop", "restart", "pause", "start", "resume", "promote"},
		OnLink: {"flap"}, // and set, which do does not name
		OnSite: {"cut", "isolate"},
	} {
		if got := r.Names(on); !reflect.DeepEqual(got, want) {
			t.Errorf("Names(%s) = %v, want %v", on, got, want)
		}
	}
	if got := r.Keys(); !reflect.DeepEqual(got, []string{"from", "every", "down", "set"}) {
		t.Errorf("Keys() = %v", got)
	}
	if k := r.KeyOf("down"); k == nil || k.Name != "flap" {
		t.Errorf("KeyOf(down) = %+v", k)
	}
	if k := r.Lookup(SetName); k == nil || k.On != OnLink || k.Instant != "" {
		t.Errorf("the link's set kind: %+v", k)
	}
	for _, name := range []string{"restart", "start", "resume", "promote"} {
		if k := r.Lookup(name); k.Instant == "" || k.Heal != "" {
			t.Errorf("%s: instantaneous %q, healed by %q; want instantaneous, nothing to heal", name, k.Instant, k.Heal)
		}
	}
	for name, heal := range map[string]string{"kill": "start", "stop": "start", "pause": "resume", "isolate": "parameters before it put back"} {
		if k := r.Lookup(name); k.Instant != "" || k.Heal != heal {
			t.Errorf("%s: healed by %q, want %q", name, k.Heal, heal)
		}
	}
	if r.Lookup("promote").Stages || !r.Lookup("kill").Stages {
		t.Error("a stage can be killed but not promoted")
	}
	c := r.Clone()
	if err := c.Add(Kind{Name: "sever", On: OnSite, Parse: parseIsolate}); err != nil || r.Lookup("sever") != nil {
		t.Errorf("a clone's kind reached the default registry (or was refused: %v)", err)
	}
}
