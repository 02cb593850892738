package spec

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestPresetsAreValidAndUsable(t *testing.T) {
	ps := Presets()
	if len(ps) < 10 {
		t.Fatalf("%d presets", len(ps))
	}
	seen := map[string]bool{}
	for _, p := range ps {
		t.Run(p.Name, func(t *testing.T) {
			if seen[p.Name] || p.Description == "" || !strings.Contains(p.Description, "RTT") {
				t.Errorf("repeated name or description without RTT: %+v", p)
			}
			seen[p.Name] = true
			checkParams(t, p.Params)
			if p.Params.RateBps == 0 || p.Params.Delay == 0 {
				t.Errorf("preset without rate or delay: %+v", p.Params)
			}
			s, err := Parse("p.toml", []byte(fmt.Sprintf("%s\n[[link]]\nsites = [\"a\", \"b\"]\npreset = %q\n", twoSites, p.Name)))
			if err != nil {
				t.Fatal(err)
			}
			want := p.Params
			want.Seed = 1
			eq(t, "forward", s.Links[0].Forward, want)
		})
	}
	t.Run("Presets returns a copy", func(t *testing.T) {
		Presets()[0].Name = "changed"
		if Presets()[0].Name == "changed" {
			t.Error("Presets shares its slice")
		}
	})
}

func TestPresetRoundTrips(t *testing.T) {
	for name, rtt := range map[string]time.Duration{
		"same-region": time.Millisecond, "transatlantic": 75 * time.Millisecond, "transpacific": 110 * time.Millisecond,
		"europe-asia": 230 * time.Millisecond, "geo-satellite": 600 * time.Millisecond,
	} {
		p, ok := findPreset(name)
		if !ok || 2*p.Params.Delay != rtt {
			t.Errorf("%s: round trip %v, want %v", name, 2*p.Params.Delay, rtt)
		}
	}
	for name, rate := range map[string]int64{"serial-9600": 9600, "serial-19200": 19200, "serial-38400": 38400, "serial-57600": 57600, "irda-115200": 115200} {
		p, ok := findPreset(name)
		if !ok || p.Params.RateBps != rate || p.Params.Delay != 5*time.Millisecond {
			t.Errorf("%s: %+v", name, p.Params)
		}
	}
}
