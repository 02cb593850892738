package livemetrics

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// Scrape fetches url as Prometheus does, asking for OpenMetrics, and
// parses the answer with Prometheus' own decoder: what a scrape would
// see, by metric family name. (For tests and checks; `replab run` serves.)
func Scrape(ctx context.Context, url string) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: %s", url, resp.Status)
	}
	dec := expfmt.NewDecoder(resp.Body, expfmt.ResponseFormat(resp.Header))
	out := map[string]*dto.MetricFamily{}
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("scrape %s: parse: %w", url, err)
		}
		out[mf.GetName()] = &mf
	}
}

// Sum adds up a family's counter, gauge or histogram-count values over
// the series whose labels include want (name=value pairs).
func Sum(mf *dto.MetricFamily, want ...string) float64 {
	if mf == nil {
		return 0
	}
	var total float64
outer:
	for _, m := range mf.GetMetric() {
		for i := 0; i+1 < len(want); i += 2 {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == want[i] && l.GetValue() == want[i+1] {
					found = true
				}
			}
			if !found {
				continue outer
			}
		}
		switch {
		case m.Counter != nil:
			total += m.GetCounter().GetValue()
		case m.Gauge != nil:
			total += m.GetGauge().GetValue()
		case m.Histogram != nil:
			total += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return total
}
