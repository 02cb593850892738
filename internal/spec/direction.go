package spec

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"replab/internal/faultkind"
	"replab/internal/linkem"
)

// valueKind is the TOML type a key takes.
type valueKind int

const (
	kString valueKind = iota
	kBool
	kInt
	kNumber // integer or float
)

// dirKey is one key that configures a link direction. The same table serves
// [[link]], [link.forward], [link.reverse] and ApplyKV.
type dirKey struct {
	name string
	kind valueKind
	want string // what a wrong TOML type is told, after "want "
	set  func(st *dirState, v any, env *env) string
}

// dirState is a direction being built: its parameters and a queue request
// that can only be turned into bytes once rate, delay and MTU are final.
type dirState struct {
	p       linkem.Params
	queue   *queueReq
	seedSet bool
}

type queueReq struct {
	bytes int64   // explicit size, or
	bdp   float64 // a multiple of the bandwidth-delay product
	at    path    // where it was set, for errors
	raw   string
}

// env is what setters need from outside: where relative trace paths start
// and how files are read.
type env struct {
	baseDir  string
	readFile func(string) ([]byte, error) // nil: the real file system
	traces   map[string]*linkem.Trace     // already loaded, by resolved path
	kinds    *faultkind.Registry          // the fault kinds; nil: faultkind.Default()
	cores    float64                      // the machine's cores for [lab] hosts = "isolated"; 0: this machine's
}

var dirKeys = []dirKey{
	{"delay", kString, `a string with a unit, like "25ms"`, func(st *dirState, v any, _ *env) string {
		d, msg := parseDuration(v.(string))
		st.p.Delay = d
		return msg
	}},
	{"jitter", kString, `a string with a unit, like "5ms"`, func(st *dirState, v any, _ *env) string {
		d, msg := parseDuration(v.(string))
		st.p.Jitter = d
		return msg
	}},
	{"jitter_dist", kString, `one of "uniform", "normal", "paretonormal"`, func(st *dirState, v any, _ *env) string {
		switch s := linkem.JitterDist(strings.TrimSpace(v.(string))); s {
		case linkem.JitterUniform, linkem.JitterNormal, linkem.JitterParetoNormal:
			st.p.JitterDist = s
			return ""
		}
		return `unknown distribution; want "uniform", "normal" or "paretonormal"`
	}},
	{"reorder", kBool, `true or false`, func(st *dirState, v any, _ *env) string {
		st.p.Reorder = v.(bool)
		return ""
	}},
	{"rate", kString, `a string with a unit, like "100mbit"`, func(st *dirState, v any, _ *env) string {
		r, msg := parseRate(v.(string))
		st.p.RateBps = r
		return msg
	}},
	{"queue", kString, `a string like "64KiB" or "1bdp"`, func(st *dirState, v any, _ *env) string {
		b, bdp, msg := parseQueue(v.(string))
		if msg == "" {
			st.queue = &queueReq{bytes: b, bdp: bdp}
		}
		return msg
	}},
	{"loss", kString, `a string percentage like "1%", or "gemodel P R 1-H 1-K"`, func(st *dirState, v any, _ *env) string {
		l, ge, msg := parseLoss(v.(string))
		st.p.Loss, st.p.GE = l, ge
		return msg
	}},
	{"trace", kString, `a string: the path of a Mahimahi trace file`, func(st *dirState, v any, e *env) string {
		t, msg := e.loadTrace(v.(string))
		st.p.Trace = t
		return msg
	}},
	{"down", kBool, `true or false`, func(st *dirState, v any, _ *env) string {
		st.p.Down = v.(bool)
		return ""
	}},
	{"mtu", kInt, `an integer between 576 and 9000`, func(st *dirState, v any, _ *env) string {
		n := v.(int64)
		if n < MinMTU || n > MaxMTU {
			return "must be between 576 and 9000 bytes"
		}
		st.p.MTU = int(n)
		return ""
	}},
	{"seed", kInt, `an integer`, func(st *dirState, v any, _ *env) string {
		st.p.Seed = v.(int64)
		st.seedSet = true
		return ""
	}},
}

func findDirKey(name string) *dirKey {
	for i := range dirKeys {
		if dirKeys[i].name == name {
			return &dirKeys[i]
		}
	}
	return nil
}

func dirKeyNames() []string {
	var out []string
	for _, k := range dirKeys {
		out = append(out, k.name)
	}
	return out
}

// typeOK reports whether v has the TOML type kind asks for; for kNumber it
// converts integers to float64.
func typeOK(kind valueKind, v any) (any, bool) {
	switch kind {
	case kString:
		_, ok := v.(string)
		return v, ok
	case kBool:
		_, ok := v.(bool)
		return v, ok
	case kInt:
		_, ok := v.(int64)
		return v, ok
	case kNumber:
		switch n := v.(type) {
		case int64:
			return float64(n), true
		case float64:
			return n, true
		}
	}
	return v, false
}

// wantMsg is the message for a value of the wrong TOML type.
func wantMsg(name, want string, v any) string {
	if n, ok := v.(int64); ok && (name == "delay" || name == "jitter") && n >= 0 {
		return fmt.Sprintf(`want a string with a unit, like "%dms"`, n)
	}
	return "want " + want
}

// maxTraceBytes bounds the size of a trace file.
const maxTraceBytes = 64 << 20

func (e *env) loadTrace(name string) (*linkem.Trace, string) {
	name = strings.TrimSpace(name)
	if name == "" {
		return nil, "empty path; want the path of a Mahimahi trace file (relative paths start at the spec's directory)"
	}
	p := name
	if !filepath.IsAbs(p) {
		p = filepath.Join(e.baseDir, p)
	}
	if t := e.traces[p]; t != nil {
		return t, ""
	}
	var data []byte
	if e.readFile != nil {
		var err error
		if data, err = e.readFile(p); err != nil {
			return nil, "cannot read trace: " + clean(err.Error())
		}
	} else {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, "cannot read trace: " + clean(err.Error())
		}
		if !fi.Mode().IsRegular() {
			return nil, fmt.Sprintf("%s is not a regular file", clean(p))
		}
		if fi.Size() > maxTraceBytes {
			return nil, fmt.Sprintf("%s is larger than 64MiB", clean(p))
		}
		if data, err = os.ReadFile(p); err != nil {
			return nil, "cannot read trace: " + clean(err.Error())
		}
	}
	t, err := linkem.ParseTrace(p, bytes.NewReader(data))
	if err != nil {
		return nil, clean(err.Error())
	}
	if t.MeanRateBps() < MinRateBps {
		return nil, fmt.Sprintf("trace delivers %d bit/s on average; want at least 9600bit", t.MeanRateBps())
	}
	if e.traces == nil {
		e.traces = map[string]*linkem.Trace{}
	}
	e.traces[p] = t
	return t, ""
}

// finish fills the defaults that depend on several keys and turns a queue
// request into bytes. It returns a message about the queue, if any.
func (st *dirState) finish() string {
	if st.p.MTU == 0 {
		st.p.MTU = linkem.DefaultMTU
	}
	if st.p.Jitter > 0 && st.p.JitterDist == linkem.JitterNone {
		st.p.JitterDist = linkem.JitterUniform
	}
	q := st.queue
	if q == nil {
		return ""
	}
	if q.bdp > 0 {
		rate := st.p.RateBps
		if st.p.Trace != nil {
			rate = st.p.Trace.MeanRateBps()
		}
		if rate == 0 {
			return `a queue in BDPs needs a rate, and this direction's rate is unlimited; set rate, or give the queue as a size like "64KiB"`
		}
		st.p.QueueBytes = bdpQueue(q.bdp, rate, st.p.Delay, st.p.MTU)
		return ""
	}
	if q.bytes < int64(st.p.MTU) {
		return fmt.Sprintf("must hold at least one packet (mtu %d bytes)", st.p.MTU)
	}
	st.p.QueueBytes = q.bytes
	return ""
}

// ApplyKV applies one `key=value` (or the bare words `down` / `up`) to a
// direction, with the same keys, units and validation as a [[link]] table in
// a spec; it is what `replab link set A->B delay=80ms rate=2mbit loss=1%`
// calls for each argument. Besides the spec's keys, `preset=NAME` replaces
// every setting except seed and down, and `trace=none` removes a trace. A
// queue given in BDPs is computed from the rate and delay p has at that
// moment, so give it after rate and delay. Relative trace paths start at
// baseDir. On error p is unchanged.
func ApplyKV(p *linkem.Params, kv string, baseDir string) error {
	kv = strings.TrimSpace(kv)
	switch kv {
	case "down":
		p.Down = true
		return nil
	case "up":
		p.Down = false
		return nil
	}
	keys := append(dirKeyNames(), "preset")
	k, v, ok := strings.Cut(kv, "=")
	if !ok {
		return &Error{Msg: fmt.Sprintf("%q: want key=value, or the word down or up; keys: %s", clean(kv), strings.Join(keys, ", "))}
	}
	k, v = strings.TrimSpace(k), strings.TrimSpace(v)
	fail := func(msg string) error { return &Error{Field: clean(k), Value: clean(v), Msg: msg} }
	if k == "preset" {
		pr, ok := findPreset(v)
		if !ok {
			return fail("unknown preset" + didYouMean(v, presetNames()) + "; presets: " + strings.Join(presetNames(), ", "))
		}
		np := pr.Params
		np.Seed, np.Down = p.Seed, p.Down
		*p = np
		return nil
	}
	dk := findDirKey(k)
	if dk == nil {
		return fail("unknown key" + didYouMean(k, keys) + "; keys: " + strings.Join(keys, ", "))
	}
	var val any
	switch dk.kind {
	case kBool:
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fail("want true or false")
		}
		val = b
	case kInt:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fail("want " + dk.want)
		}
		val = n
	default:
		val = v
	}
	st := dirState{p: *p}
	if k == "trace" && v == "none" {
		st.p.Trace = nil
	} else if msg := dk.set(&st, val, &env{baseDir: baseDir}); msg != "" {
		return fail(msg)
	}
	if st.p.Jitter > 0 && st.p.JitterDist == linkem.JitterNone {
		st.p.JitterDist = linkem.JitterUniform
	}
	if st.queue != nil {
		if msg := st.finish(); msg != "" {
			return fail(msg)
		}
	}
	*p = st.p
	return nil
}
