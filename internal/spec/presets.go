package spec

import (
	"time"

	"replab/internal/linkem"
)

// Preset is a named, typical link direction. A [[link]] with `preset = NAME`
// starts both directions from Params, then applies its own keys.
type Preset struct {
	Name        string
	Description string // includes the round-trip time and where the numbers come from
	Params      linkem.Params
}

func wan(delay time.Duration, rateBps int64) linkem.Params {
	return linkem.Params{Delay: delay, RateBps: rateBps, MTU: linkem.DefaultMTU}
}

func serial(rateBps int64) linkem.Params {
	return wan(5*time.Millisecond, rateBps)
}

var presets = []Preset{
	{"same-region", "~1 ms RTT (0.5ms each way), 10gbit: two data centres in one cloud region, a few km of fibre apart",
		wan(500*time.Microsecond, 10_000_000_000)},
	{"transatlantic", "~75 ms RTT (37.5ms each way), 1gbit: New York <-> London; ~5,600 km of fibre at 2/3 c is ~28 ms one way, plus routing",
		wan(37500*time.Microsecond, 1_000_000_000)},
	{"transpacific", "~110 ms RTT (55ms each way), 1gbit: Los Angeles <-> Tokyo; ~8,800 km of fibre is ~44 ms one way, plus routing",
		wan(55*time.Millisecond, 1_000_000_000)},
	{"europe-asia", "~230 ms RTT (115ms each way), 500mbit: Frankfurt <-> Singapore by the longer cable routes and transit hops",
		wan(115*time.Millisecond, 500_000_000)},
	{"geo-satellite", "~600 ms RTT (300ms each way), 10mbit: a geostationary hop (35,786 km up and down, ~240 ms one way) plus ground segments; real links are asymmetric, so set a slower [link.reverse] rate for the uplink",
		wan(300*time.Millisecond, 10_000_000)},
	{"serial-9600", "9600 bit/s, 5ms each way (~10 ms RTT): a 9.6 kbit/s serial line; the slowest adjustable IrDA setting of the DIMHRS replication study (environment 2)",
		serial(9600)},
	{"serial-19200", "19200 bit/s, 5ms each way (~10 ms RTT): a 19.2 kbit/s serial line, as an IrDA link setting of the DIMHRS study",
		serial(19200)},
	{"serial-38400", "38400 bit/s, 5ms each way (~10 ms RTT): a 38.4 kbit/s serial line, as an IrDA link setting of the DIMHRS study",
		serial(38400)},
	{"serial-57600", "57600 bit/s, 5ms each way (~10 ms RTT): a 57.6 kbit/s serial line, as an IrDA link setting of the DIMHRS study",
		serial(57600)},
	{"irda-115200", "115200 bit/s, 5ms each way (~10 ms RTT): IrDA SIR at its top speed, the fastest low-speed link of the DIMHRS study",
		serial(115200)},
}

// Presets returns the link presets a spec's `preset` key accepts, in a
// stable order. The slice is a copy.
func Presets() []Preset {
	return append([]Preset(nil), presets...)
}

func findPreset(name string) (Preset, bool) {
	for _, p := range presets {
		if p.Name == name {
			return p, true
		}
	}
	return Preset{}, false
}

func presetNames() []string {
	var out []string
	for _, p := range presets {
		out = append(out, p.Name)
	}
	return out
}
