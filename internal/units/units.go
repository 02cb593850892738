// Package units writes quantities for people: bytes in binary units, bit
// rates in decimal ones, numbers without trailing zeros. One formatter for
// the whole of replab, so a figure reads the same in the terminal, the
// logs and the HTML report.
package units

import (
	"math"
	"strconv"
	"strings"
)

// Trim writes v with at most prec decimals, without trailing zeros.
func Trim(v float64, prec int) string {
	s := strconv.FormatFloat(v, 'f', prec, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// Bytes writes a byte count in binary units with one decimal: 512 B,
// 250.2 KiB, 47.5 MiB, 1.2 GiB.
func Bytes(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1<<40:
		return Trim(v/(1<<40), 1) + " TiB"
	case a >= 1<<30:
		return Trim(v/(1<<30), 1) + " GiB"
	case a >= 1<<20:
		return Trim(v/(1<<20), 1) + " MiB"
	case a >= 1<<10:
		return Trim(v/(1<<10), 1) + " KiB"
	}
	return Trim(v, 0) + " B"
}

// Bits writes a bit rate in decimal units with one decimal: 948.6 kbit/s,
// 50 Mbit/s.
func Bits(v float64) string { return BitsPrec(v, 1) }

// BitsPrec is Bits with at most prec decimals: where two rates close to
// each other are compared (a link's configured against its delivered).
func BitsPrec(v float64, prec int) string {
	a := math.Abs(v)
	switch {
	case a >= 1e9:
		return Trim(v/1e9, prec) + " Gbit/s"
	case a >= 1e6:
		return Trim(v/1e6, prec) + " Mbit/s"
	case a >= 1e3:
		return Trim(v/1e3, prec) + " kbit/s"
	}
	return Trim(v, 0) + " bit/s"
}
