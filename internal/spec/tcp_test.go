package spec

import (
	"testing"
	"time"
)

func TestTCPEraKeys(t *testing.T) {
	s, err := Parse("era.toml", []byte(`
[lab]
name = "era"
[site.old]
tcp = "1999"
[site.mixed]
tcp = "1999"
tcp_initcwnd = 1               # the study's Solaris hosts started at one segment
tcp_congestion = "cubic"
tcp_sack = true
tcp_early_retrans = 3
[site.own]
tcp_initcwnd = 4
tcp_rto_min = "300ms"
tcp_timestamps = false
tcp_frto = 1
tcp_recovery = 0
[site.today]
[[link]]
sites = ["old", "mixed"]
`))
	if err != nil {
		t.Fatal(err)
	}
	old, mixed, own, today := s.Sites[0].TCP, s.Sites[1].TCP, s.Sites[2].TCP, s.Sites[3].TCP
	for _, tc := range []struct {
		name, got, want string
	}{
		{"the preset, whole", old.Congestion + " " + old.Describe(),
			"reno preset 1999: initcwnd=2 rto_min=1s sack=false timestamps=false window_scaling=false slow_start_after_idle=true early_retrans=0 recovery=0 frto=0"},
		{"the site's own keys win over the preset", mixed.Congestion + " " + mixed.Describe(),
			"cubic preset 1999: initcwnd=1 rto_min=1s sack=true timestamps=false window_scaling=false slow_start_after_idle=true early_retrans=3 recovery=0 frto=0"},
		{"the keys without a preset", own.Congestion + " " + own.Describe(), "cubic initcwnd=4 rto_min=300ms timestamps=false recovery=0 frto=1"},
		{"no keys: the kernel's", today.Congestion + " " + today.Describe(), "cubic "},
	} {
		if tc.got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, tc.got, tc.want)
		}
	}
	if own.RTOMin != 300*time.Millisecond || old.InitCwnd != 2 || *old.SACK || today.SACK != nil {
		t.Errorf("rto_min %v, initcwnd %d, sack %v / %v", own.RTOMin, old.InitCwnd, *old.SACK, today.SACK)
	}
	// The preset's values are copies: changing one site changes no other.
	*old.SACK = true
	if *s.Sites[1].TCP.Timestamps || *tcpPresets[0].TCP.SACK {
		t.Error("sites share the preset's values")
	}
}
