package spec

import (
	"os"
	"path/filepath"
	"replab/internal/testkit"
	"strings"
	"testing"
)

// wantInError pins, for each bad input, the file:line and field its errors
// must name; the full text is in the .golden file next to the input.
var wantInError = map[string][]string{
	"unknown-key.toml": {
		`unknown-key.toml:4: lab.sed: unknown key (did you mean "seed"?); accepted in [lab]: name, subnet, seed`,
		`unknown-key.toml:7: site.a.cpus: unknown key (did you mean "cpu"?)`,
		`unknown-key.toml:12: link[1].dealy: unknown key (did you mean "delay"?)`,
		`unknown-key.toml:14: link[1].forward.rat: unknown key (did you mean "rate"?)`,
		`unknown-key.toml:16: links: unknown key (did you mean "link"?); accepted in the top level: lab, site, link`,
	},
	"storage-bad.toml": {
		`storage-bad.toml:13: storage.san.size = "10MiB": must be between 64MiB and 1TiB`,
		`storage-bad.toml:14: storage.san.delay = "2.5ms": want whole milliseconds`,
		`storage-bad.toml:16: storage.nas.kind = "nsa": unknown kind (did you mean "nas"?)`,
		`storage-bad.toml:19: storage.ram.site: has no meaning for kind = "memory"`,
		`storage-bad.toml:24: storage.far.iops: has no meaning for kind = "nas"; only a san is a block device here`,
		`storage-bad.toml:25: storage.nosite: a san is served from a site`,
		`storage-bad.toml:27: storage.nosite.sizee: unknown key (did you mean "size"?)`,
		`storage-bad.toml:30: storage.net.site = "stroe": unknown site (did you mean "store"?)`,
		`storage-bad.toml:36: node.p1.storage: unknown storage "sna" (did you mean "san"?)`,
		`storage-bad.toml:40: node.p2.storage: storage far is served from site far, which no chain of [[link]]s joins to site b`,
	},
	"delay-no-unit.toml":        {`delay-no-unit.toml:9: link[1].delay = "80": missing unit; use a duration like "80ms", "1.5s", "250us"`},
	"rate-fast.toml":            {`rate-fast.toml:9: link[1].rate = "fast": not a rate`},
	"rate-too-low.toml":         {`rate-too-low.toml:9: link[1].rate = "1kbit": must be between 9600bit and 10gbit`, `rate-too-low.toml:11: link[1].reverse.rate = "20gbit"`},
	"rate-kbps.toml":            {`rate-kbps.toml:9: link[1].rate = "100kbps": "kbps" is ambiguous`, `write "100kbit"`, `rate-kbps.toml:11: link[1].forward.rate = "10Mbps"`},
	"unknown-site.toml":         {`unknown-site.toml:8: link[1].sites = ["primary", "asia"]: unknown site "asia"; defined sites: primary, eu`, `unknown-site.toml:11: link[2].sites = ["primray", "eu"]: unknown site "primray" (did you mean "primary"?)`},
	"duplicate-site.toml":       {`duplicate-site.toml:9: site primary is defined twice (first at line 4)`},
	"address-clash.toml":        {`address-clash.toml:7: site.b.address = "198.18.0.7": already used by site a (line 4)`},
	"address-outside.toml":      {`address-outside.toml:6: site.a.address = "10.9.1.5": outside the lab subnet 10.9.0.0/24`, `address-outside.toml:8: site.b.address = "10.9.0.0": is the subnet's network address`, `address-outside.toml:10: site.c.address = "10.9.0.255": is the subnet's broadcast address`, `address-outside.toml:12: site.d.address = "fe80::1": not an IPv4 address`},
	"bad-lab-name.toml":         {`bad-lab-name.toml:2: lab.name = "My_Lab": want 1 to 20 characters of a-z, 0-9 and '-'`},
	"bad-site-name.toml":        {`bad-site-name.toml:4: site.Primary: site name must be`, `bad-site-name.toml:5: site.a-very-long-site-name: site name must be 1 to 15 characters`},
	"negative-values.toml":      {`negative-values.toml:6: site.a.cpu = -1:`, `negative-values.toml:7: site.a.memory = "1MiB": must be at least 16MiB`, `negative-values.toml:9: site.b.cpu = 0:`, `negative-values.toml:10: site.b.rmem_max = "-4KiB": must not be negative`, `negative-values.toml:14: link[1].delay = "-5ms": must not be negative`, `negative-values.toml:15: link[1].jitter = "20s": too long; at most 10s`, `negative-values.toml:16: link[1].mtu = 100: must be between 576 and 9000 bytes`, `negative-values.toml:17: link[1].queue = "100B": must hold at least one packet`, `negative-values.toml:19: link[1].reverse.delay = "1h"`, `negative-values.toml:20: link[1].reverse.mtu = 65536`, `negative-values.toml:21: link[1].reverse.jitter_dist = "gaussian": unknown distribution`},
	"loss-150.toml":             {`loss-150.toml:9: link[1].loss = "150%": must be at least 0% and below 100%`, `loss-150.toml:11: link[1].reverse.loss = "2": missing "%"`},
	"bad-gemodel.toml":          {`bad-gemodel.toml:9: link[1].loss = "gemodel 1% 10%": want "gemodel P R 1-H 1-K" with four percentages`, `bad-gemodel.toml:11: link[1].reverse.loss = "gemodel 1% 10% 100% 0.5": gemodel 1-K = "0.5": missing "%"`},
	"missing-lab-name.toml":     {`missing-lab-name.toml:1: lab: name is required`},
	"missing-lab.toml":          {`missing-lab.toml:1: missing [lab] table`},
	"one-site.toml":             {`one-site.toml:4: site: need at least 2 sites, found 1 (primary)`},
	"no-sites.toml":             {`no-sites.toml:1: no sites; define at least two`},
	"same-link-twice.toml":      {`same-link-twice.toml:12: link[2].sites = ["b", "a"]: b and a are already linked by link[1] (line 7)`},
	"self-link.toml":            {`self-link.toml:8: link[1].sites = ["a", "a"]: a link joins two different sites`, `self-link.toml:11: link[2].sites = ["a", "b", "c"]: want exactly two site names`, `self-link.toml:13: link[3]: sites is required`},
	"wrong-types.toml":          {`wrong-types.toml:3: lab.seed = "one": want an integer`, `wrong-types.toml:6: site.a.cpu = "2": want a number of cores`, `wrong-types.toml:7: site.a.tcp_window_scaling = "yes": want true or false`, `wrong-types.toml:9: site.b.memory = 1073741824: want a string with a unit`, `wrong-types.toml:13: link[1].delay = 25: want a string with a unit, like "25ms"`, `wrong-types.toml:14: link[1].rate = 100: want a string with a unit, like "100mbit"`, `wrong-types.toml:15: link[1].reorder = "yes": want true or false`, `wrong-types.toml:16: link[1].mtu = "1500": want an integer`, `wrong-types.toml:17: link[1].loss = 0.01: want a string percentage like "1%"`},
	"syntax-error.toml":         {`syntax-error.toml:4: invalid TOML:`},
	"syntax-missing-value.toml": {`syntax-missing-value.toml:5: invalid TOML:`},
	"syntax-unterminated.toml":  {`syntax-unterminated.toml:2: invalid TOML:`},
	"duplicate-key.toml":        {`duplicate-key.toml:11: link[1].delay: key is set twice (first at line 9)`},
	"duplicate-lab.toml":        {`duplicate-lab.toml:4: table [lab] is defined twice (first at line 1)`},
	"link-not-array.toml":       {`link-not-array.toml:7: link = {…}: want a list of links: write each one as [[link]]`},
	"site-not-table.toml":       {`site-not-table.toml:5: site.a = 1: want a table; write [site.a]`, `site-not-table.toml:6: site.b = "x": want a table`},
	"queue-bdp-unlimited.toml":  {`queue-bdp-unlimited.toml:11: link[1].queue = "1bdp": a queue in BDPs needs a rate`, `(reverse direction)`},
	"bad-preset.toml":           {`bad-preset.toml:9: link[1].preset = "transatlntic": unknown preset (did you mean "transatlantic"?); presets: same-region,`},
	"tcp-mem.toml":              {`tcp-mem.toml:5: site.a.tcp_rmem = "4096 131072"`, `tcp-mem.toml:6: site.a.tcp_wmem = "33554432": missing unit`, `tcp-mem.toml:8: site.b.tcp_rmem = "65536 4096 131072": want min <= default <= max`, `tcp-mem.toml:9: site.b.tcp_wmem = "32Mbit": sizes are in bytes, not bits`, `tcp-mem.toml:10: site.b.tcp_congestion = "BBR"`},
	"bad-subnet.toml":           {`bad-subnet.toml:3: lab.subnet = "198.18.0.1/16": host bits are set (did you mean "198.18.0.0/16"?)`},
	"subnet-full.toml":          {`subnet-full.toml:7: site.c: no free address left in the lab subnet 10.0.0.0/30`},
	"trace-missing.toml":        {`trace-missing.toml:9: link[1].trace = "no-such-file.trace": cannot read trace`},
	"trace-bad.toml":            {`trace-bad.toml:9: link[1].trace = "../bad.trace": testdata/bad.trace:3: "three" is not a millisecond timestamp`},
	"capture-bad.toml":          {`capture-bad.toml:10: link[1].capture = "yes": want true or false`, `capture-bad.toml:15: link[2].capture_bytes = 10: must be between 20 and 65535 bytes`, `capture-bad.toml:19: link[3].capture_bytes = 128: has no effect without capture = true`},
	"fault-link.toml": {
		`fault-link.toml:20: fault[1].link: a link fault needs set`,
		`fault-link.toml:21: fault[1].fro: unknown key (did you mean "for"?); accepted in [[fault]]: at, for, link, set, node, stage, do`,
		`fault-link.toml:23: fault[2]: say what the fault acts on`,
		`fault-link.toml:25: fault[2].set: set changes a link`,
		`fault-link.toml:29: fault[3].link = "primary-eu": want "A<->B"`,
		`fault-link.toml:34: fault[4].link = "primary<->asai": unknown site "asai" (did you mean "asia"?); defined sites: primary, eu, asia`,
		`fault-link.toml:39: fault[5].link = "eu->asia": no [[link]] joins eu and asia; a fault acts on one [[link]]: primary<->eu, asia<->primary`,
		`fault-link.toml:45: fault[6].set = ["delay=80", "rate=fast"]: delay = 80: missing unit`,
		`fault-link.toml:45: fault[6].set = ["delay=80", "rate=fast"]: rate = fast: not a rate`,
		`fault-link.toml:50: fault[7].set = "mtu=1500": mtu = 1500: the mtu cannot change during a run`,
		`fault-link.toml:56: fault[8].set = "preset=transatlantic": preset = transatlantic: changes the mtu from 9000 to 1500 bytes`,
		`fault-link.toml:62: fault[9].set = "queue=1bdp": queue = 1bdp: a queue in BDPs needs a rate`,
		`fault-link.toml:64: fault[10]: at is required`,
		`fault-link.toml:69: fault[11].at = "-5s": must not be negative`,
		`fault-link.toml:74: fault[12].at = "30s": a time past the end of the measure phase, which lasts 30s`,
		`fault-link.toml:80: fault[13].for = "0s": want a duration above 0`,
		`fault-link.toml:86: fault[14].for = "15s": a time past the end: healed at 35s, but the run ends at 32s (measure phase 30s + cooldown 2s)`,
		`fault-link.toml:98: fault[16].link: overlaps fault[15] (line 90) on eu->primary`,
	},
	"fault-node.toml": {
		`fault-node.toml:34: fault[1].node: a fault acts on a link or on a node, not both`,
		`fault-node.toml:41: fault[2].set: set changes a link`,
		`fault-node.toml:47: fault[3].do: do acts on a node`,
		`fault-node.toml:51: fault[4].node: a node fault needs do: one of kill, stop, restart, pause, start, resume`,
		`fault-node.toml:56: fault[5].do = "promo": unknown action (did you mean "promote"?)`,
		`fault-node.toml:61: fault[6].do = "kil": unknown action (did you mean "kill"?)`,
		`fault-node.toml:65: fault[7].node = "a1": unknown node "a1"; nodes: p1, e1`,
		`fault-node.toml:70: fault[8].for = "5s": do = "restart" is instantaneous and takes no for`,
		`fault-node.toml:76: fault[9].for = "5s": do = "resume" is instantaneous`,
		`fault-node.toml:82: fault[10].for = "5s": do = "start" is instantaneous`,
		`fault-node.toml:95: fault[12].node: overlaps fault[11] (line 86) on node e1`,
		`fault-node.toml:100: fault[13].node: overlaps fault[11] (line 86) on node e1`,
		`fault-node.toml:112: fault[15].stage: stage names one of a node's replication stages: it goes with node = "NAME"`,
		`fault-node.toml:118: fault[16].do = "promote": a stage is a process, not a server`,
		`fault-node.toml:123: fault[17].stage = "re plicat": want a stage name like "extract", "pump", "collector" or "replicat"`,
	},
	"fault-isolate.toml": {
		`fault-isolate.toml:20: fault[1].site = "asai": unknown site "asai" (did you mean "asia"?); defined sites: primary, eu, asia, lonely`,
		`fault-isolate.toml:25: fault[2].site = "lonely": site lonely has no [[link]]`,
		`fault-isolate.toml:30: fault[3].site: a site fault needs do: one of cut, isolate`,
		`fault-isolate.toml:35: fault[4].do = "isolat": unknown action (did you mean "isolate"?); do is one of cut, isolate`,
		`fault-isolate.toml:40: fault[5].do: do acts on a node`,
		`fault-isolate.toml:44: fault[6].site: a fault acts on a link, a node or a site, not two`,
		`fault-isolate.toml:50: fault[7].do = "isolate": isolate acts on a site: say which with site = "NAME"`,
		`fault-isolate.toml:57: fault[8].every: every goes with do = "flap", not with do = "isolate"`,
		`fault-isolate.toml:67: fault[10].link: overlaps fault[9] (line 59) on eu->primary`,
		`fault-isolate.toml:78: fault[12].site: overlaps fault[10] (line 65) on eu->primary`,
		`fault-isolate.toml:84: fault[13].link: overlaps fault[12] (line 76) on asia->primary`,
		`fault-isolate.toml:89: fault[14].for = "5s": a time past the end`,
	},
	"fault-flap.toml": {
		`fault-flap.toml:29: fault[1].do: a flap needs every`,
		`fault-flap.toml:29: fault[1].do: a flap needs down`,
		`fault-flap.toml:29: fault[1].do: a flap needs for`,
		`fault-flap.toml:36: fault[2].every = "2": missing unit`,
		`fault-flap.toml:37: fault[2].down = "1x": not a duration`,
		`fault-flap.toml:45: fault[3].down = "1s": not below every = 1s`,
		`fault-flap.toml:52: fault[4].every = "10s": not below for = 10s`,
		`fault-flap.toml:60: fault[5].every = "0s": want a duration above 0`,
		`fault-flap.toml:70: fault[6].set: set goes with a link fault without do, not with do = "flap"`,
		`fault-flap.toml:76: fault[7].every: every goes with do = "flap", not with a link fault without do`,
		`fault-flap.toml:81: fault[8].do = "flap": flap acts on a link: it goes with link = "A<->B"`,
		`fault-flap.toml:86: fault[9].do = "flop": unknown action (did you mean "flap"?); do is one of flap`,
		`fault-flap.toml:90: fault[10].for = "20s": a time past the end`,
		`fault-flap.toml:115: fault[13].link: overlaps fault[11] (line 96) on primary->eu`,
	},
	"fault-no-engine.toml":        {`fault-no-engine.toml:19: fault[2].node = "n1": node faults need an engine`},
	"fault-not-array.toml":        {`fault-not-array.toml:7: fault = {…}: want a list of faults: write each one as [[fault]]`},
	"search-refine-negative.toml": {`search-refine-negative.toml:17: run.search_refine = -2: want a number of probes from 0 (none) to 20`},
	"search-refine-fraction.toml": {`search-refine-fraction.toml:16: run.search_refine = 2.5: want a whole number of probes`},
	"search-refine-alone.toml":    {`search-refine-alone.toml:16: run.search_refine: search_refine belongs to a saturation search: add search = "users"`},
	"search-refine-link.toml":     {`search-refine-link.toml:19: run.search_refine: belongs to a saturation search`},
	"many-errors.toml":            {`many-errors.toml:9: link[1].key00: unknown key`, `many-errors.toml: 5 more errors not shown`},
}

// TestBadSpecs parses every testdata/errors/*.toml and compares the error
// with its .golden file (go test -update rewrites them).
func TestBadSpecs(t *testing.T) {
	files, err := filepath.Glob("testdata/errors/*.toml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no inputs in testdata/errors: %v", err)
	}
	seen := map[string]bool{}
	for _, f := range files {
		name := filepath.Base(f)
		seen[name] = true
		t.Run(strings.TrimSuffix(name, ".toml"), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			// Traces resolve against the spec's directory: testdata/errors.
			_, err = parse(name, data, &env{baseDir: "testdata/errors"})
			if err == nil {
				t.Fatalf("%s parsed without error", name)
			}
			got := err.Error() + "\n"
			testkit.Golden(t, strings.TrimSuffix(f, ".toml")+".golden", []byte(got))
			for _, w := range wantInError[name] {
				if !strings.Contains(got, w) {
					t.Errorf("error does not contain %q; got:\n%s", w, got)
				}
			}
			for _, line := range strings.Split(strings.TrimSuffix(got, "\n"), "\n") {
				if !strings.HasPrefix(line, name+":") {
					t.Errorf("error line does not start with %q: %s", name+":", line)
				}
			}
		})
	}
	for name := range wantInError {
		if !seen[name] {
			t.Errorf("wantInError names %s, which is not in testdata/errors", name)
		}
	}
}
