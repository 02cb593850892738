package main

// owdBreakdown splits the one-way errors of probes into where the time
// went, each part in ms over the probes with every timestamp (parts add up
// to the user-space error, probe by probe).
type owdBreakdown struct {
	Probes int `json:"probes"`
	// SendToRead: the sender's write, the kernel's way to the TUN device
	// and the wait until the emulator read it.
	SendToRead errStats `json:"send_to_emulator_read"`
	// LinkModel: due − read − configured one-way delay: serialization and
	// queueing behind other packets on the link (the model, exact).
	LinkModel errStats `json:"link_model_beyond_configured"`
	// Lateness: the emulator's own lateness, its write after the due time.
	Lateness errStats `json:"emulator_lateness"`
	// WriteToKernelRx: from the emulator's write to the receiving socket's
	// kernel timestamp.
	WriteToKernelRx errStats `json:"write_to_kernel_rx"`
	// ReceiverWakeup: the kernel timestamp until the receiving goroutine
	// had the probe: the measuring probe's own delay.
	ReceiverWakeup errStats `json:"receiver_wakeup"`
	// KernelRxError: kernel timestamp − send − configured: the error
	// without the receiver's wake-up.
	KernelRxError errStats `json:"kernel_rx_error"`
}

// breakdown builds an owdBreakdown from the probes followed through the
// emulator; configuredMs is the one-way delay the link should give.
func breakdown(probes []owdSample, configuredMs float64) owdBreakdown {
	ms := func(ns int64) float64 { return float64(ns) / 1e6 }
	var send, model, late, write, wake, kern []float64
	for _, p := range probes {
		if p.kernel == 0 || p.hop.readAt == 0 {
			continue
		}
		send = append(send, ms(p.hop.readAt-p.sent))
		model = append(model, ms(p.hop.dueAt-p.hop.readAt)-configuredMs)
		late = append(late, ms(p.hop.writeAt-p.hop.dueAt))
		write = append(write, ms(p.kernel-p.hop.writeAt))
		wake = append(wake, ms(p.user-p.kernel))
		kern = append(kern, ms(p.kernel-p.sent)-configuredMs)
	}
	return owdBreakdown{
		Probes:          len(send),
		SendToRead:      errorStats(send, 0),
		LinkModel:       errorStats(model, 0),
		Lateness:        errorStats(late, 0),
		WriteToKernelRx: errorStats(write, 0),
		ReceiverWakeup:  errorStats(wake, 0),
		KernelRxError:   errorStats(kern, 0),
	}
}
