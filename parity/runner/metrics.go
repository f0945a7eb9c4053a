package runner

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// metricFamilies reduces a Prometheus text exposition (a /metrics answer)
// to what two servers can share: for each family of names the text has,
// the sorted names of the labels its samples carry ("le" and "quantile",
// the buckets' and quantiles', are part of the family's type, not
// labels). Values, label values and families not named are dropped: they
// count each server's own requests. A family neither server has samples of
// is missing on both, which compares equal.
func metricFamilies(text string, names []string) (map[string]any, error) {
	parser := expfmt.NewTextParser(model.LegacyValidation)
	parsed, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	out := map[string]any{}
	for _, name := range names {
		family, ok := parsed[name]
		if !ok || len(family.GetMetric()) == 0 {
			continue
		}
		labels := map[string]bool{}
		for _, m := range family.GetMetric() {
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = true
			}
		}
		sorted := []any{}
		for _, l := range slices.Sorted(maps.Keys(labels)) {
			sorted = append(sorted, l)
		}
		out[name] = map[string]any{"type": strings.ToLower(family.GetType().String()), "labels": sorted}
	}
	return out, nil
}
