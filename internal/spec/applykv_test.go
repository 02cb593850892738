package spec

import (
	"strings"
	"testing"
	"time"

	"replab/internal/linkem"
)

func TestApplyKV(t *testing.T) {
	base := linkem.Params{Delay: 10 * time.Millisecond, RateBps: 1e6, MTU: 1500, Seed: 42}
	tests := []struct {
		name string
		kvs  []string
		want func(p *linkem.Params)
	}{
		{"delay, rate and loss as in `replab link set A->B`", []string{"delay=80ms", "rate=2mbit", "loss=1%"}, func(p *linkem.Params) {
			p.Delay, p.RateBps, p.Loss = 80*time.Millisecond, 2e6, 0.01
		}},
		{"down and up are bare words", []string{"down"}, func(p *linkem.Params) { p.Down = true }},
		{"up after down", []string{"down", "up"}, func(p *linkem.Params) {}},
		{"down=true works too", []string{"down=true"}, func(p *linkem.Params) { p.Down = true }},
		{"spaces around = are fine", []string{" delay = 5ms "}, func(p *linkem.Params) { p.Delay = 5 * time.Millisecond }},
		{"jitter gets the uniform distribution", []string{"jitter=2ms"}, func(p *linkem.Params) {
			p.Jitter, p.JitterDist = 2*time.Millisecond, linkem.JitterUniform
		}},
		{"jitter_dist and reorder", []string{"jitter_dist=normal", "reorder=true"}, func(p *linkem.Params) {
			p.JitterDist, p.Reorder = linkem.JitterNormal, true
		}},
		{"gemodel loss replaces random loss", []string{"loss=1%", "loss=gemodel 1% 10% 100% 0%"}, func(p *linkem.Params) {
			p.GE = &linkem.GilbertElliott{P: 0.01, R: 0.1, LossBad: 1}
		}},
		{"queue in BDPs uses the current rate and delay", []string{"rate=8mbit", "delay=50ms", "queue=1bdp"}, func(p *linkem.Params) {
			p.RateBps, p.Delay, p.QueueBytes = 8e6, 50*time.Millisecond, 100_000
		}},
		{"queue as a size", []string{"queue=64KiB"}, func(p *linkem.Params) { p.QueueBytes = 65536 }},
		{"rate unlimited", []string{"rate=unlimited"}, func(p *linkem.Params) { p.RateBps = 0 }},
		{"mtu and seed", []string{"mtu=9000", "seed=-3"}, func(p *linkem.Params) { p.MTU, p.Seed = 9000, -3 }},
		{"preset keeps seed and down", []string{"down", "preset=geo-satellite"}, func(p *linkem.Params) {
			*p = linkem.Params{Delay: 300 * time.Millisecond, RateBps: 10e6, MTU: 1500, Seed: 42, Down: true}
		}},
		{"trace relative to baseDir, then none", []string{"trace=cell.trace", "trace=none"}, func(p *linkem.Params) {}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, want := base, base
			tt.want(&want)
			for _, kv := range tt.kvs {
				if err := ApplyKV(&got, kv, "testdata"); err != nil {
					t.Fatalf("ApplyKV(%q): %v", kv, err)
				}
				checkParams(t, got)
			}
			eq(t, "params", got, want)
		})
	}
}

func TestApplyKVTrace(t *testing.T) {
	p := linkem.Params{MTU: 1500}
	if err := ApplyKV(&p, "trace=cell.trace", "testdata"); err != nil {
		t.Fatal(err)
	}
	if p.Trace == nil || len(p.Trace.Opportunity) != 10 {
		t.Fatalf("trace = %+v", p.Trace)
	}
}

func TestApplyKVErrors(t *testing.T) {
	tests := []struct{ kv, want string }{
		{"delay=80", `delay = 80: missing unit; use a duration like "80ms", "1.5s", "250us"`},
		{"rate=fast", `rate = fast: not a rate`},
		{"rate=1kbit", `rate = 1kbit: must be between 9600bit and 10gbit`},
		{"rate=10mbps", `rate = 10mbps: "mbps" is ambiguous`},
		{"loss=150%", `loss = 150%: must be at least 0% and below 100%`},
		{"loss=gemodel 1%", `loss = gemodel 1%: want "gemodel P R 1-H 1-K"`},
		{"dealy=5ms", `dealy = 5ms: unknown key (did you mean "delay"?); keys: delay, jitter,`},
		{"reorder=maybe", `reorder = maybe: want true or false`},
		{"mtu=big", `mtu = big: want an integer between 576 and 9000`},
		{"mtu=100", `mtu = 100: must be between 576 and 9000 bytes`},
		{"queue=1bdp", ``}, // fine: base has a rate
		{"rate=unlimited", ``},
		{"preset=mars", `preset = mars: unknown preset; presets: same-region,`},
		{"trace=missing.trace", `trace = missing.trace: cannot read trace`},
		{"sideways", `"sideways": want key=value, or the word down or up`},
		{"jitter_dist=gaussian", `unknown distribution`},
	}
	for _, tt := range tests {
		t.Run(tt.kv, func(t *testing.T) {
			p := linkem.Params{Delay: 10 * time.Millisecond, RateBps: 1e6, MTU: 1500}
			before := p
			err := ApplyKV(&p, tt.kv, "testdata")
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ApplyKV(%q) = %v, want an error containing %q", tt.kv, err, tt.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
			eq(t, "params after a failed ApplyKV", p, before)
		})
	}
	t.Run("queue in BDPs on an unlimited rate", func(t *testing.T) {
		p := linkem.Params{Delay: 10 * time.Millisecond}
		err := ApplyKV(&p, "queue=1bdp", "")
		if err == nil || !strings.Contains(err.Error(), "needs a rate") {
			t.Fatalf("err = %v", err)
		}
	})
}
