package podautoscaler

// From the metrics' count to the count written: stabilisation over recent
// recommendations, the scale rate limits, minReplicas and maxReplicas.

import (
	"math"
	"sync"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	apidefaults "github.com/kubeembed/apiserver/internal/hpa"
)

// recommendation is a count the metrics proposed, before normalisation.
type recommendation struct {
	replicas int32
	at       time.Time
}

// scaleEvent is a change of the target's replicas the controller made.
type scaleEvent struct {
	change   int32 // never negative
	at       time.Time
	outdated bool
}

// history is what the controller remembers of each HPA (by key) between
// syncs, in memory as upstream: lost when it restarts.
type history struct {
	mu              sync.Mutex
	recommendations map[string][]recommendation
	up, down        map[string][]scaleEvent
}

func newHistory() *history {
	return &history{recommendations: map[string][]recommendation{}, up: map[string][]scaleEvent{}, down: map[string][]scaleEvent{}}
}

func (h *history) forget(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.recommendations, key)
	delete(h.up, key)
	delete(h.down, key)
}

// initial records the current count as the first recommendation.
func (h *history) initial(key string, current int32, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.recommendations[key] == nil {
		h.recommendations[key] = []recommendation{{current, now}}
	}
}

// record keeps r in place of an old recommendation (index old), or
// appended.
func (h *history) record(key string, old int, r recommendation) {
	if old >= 0 {
		h.recommendations[key][old] = r
		return
	}
	h.recommendations[key] = append(h.recommendations[key], r)
}

// stabilized is, without a behavior, the highest recommendation of the
// scale-down stabilisation window, desired included, which it records.
func (h *history) stabilized(key string, desired int32, now time.Time) int32 {
	h.mu.Lock()
	defer h.mu.Unlock()
	cutoff := now.Add(-downscaleStabilisationWindow)
	highest, old := desired, -1
	for i, r := range h.recommendations[key] {
		if r.at.Before(cutoff) {
			old = i
		} else if r.replicas > highest {
			highest = r.replicas
		}
	}
	h.record(key, old, recommendation{desired, now})
	return highest
}

// normalize is the count of an HPA without a behavior: stabilised, then
// within the scale-up limit (double, at least 4), minReplicas and
// maxReplicas; it sets AbleToScale and ScalingLimited.
func (c *Controller) normalize(hpa *autoscalingv2.HorizontalPodAutoscaler, key string, current, desired, minReplicas int32, now time.Time) int32 {
	stable := c.history.stabilized(key, desired, now)
	if stable != desired {
		setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionTrue, "ScaleDownStabilized",
			"recent recommendations were higher than current one, applying the highest recent recommendation", now)
	} else {
		setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionTrue, "ReadyForNewScale", "recommended size matches current size", now)
	}
	out, reason, message := withinRules(current, stable, minReplicas, hpa.Spec.MaxReplicas)
	limited := corev1.ConditionFalse
	if out != stable {
		limited = corev1.ConditionTrue
	}
	setCondition(hpa, autoscalingv2.ScalingLimited, limited, reason, message, now)
	return out
}

// withinRules keeps desired within minReplicas, and maxReplicas or the
// scale-up limit, whichever is lower.
func withinRules(current, desired, minReplicas, maxReplicas int32) (int32, string, string) {
	upLimit := int32(math.Max(2*float64(current), 4))
	highest, reason, message := maxReplicas, "TooManyReplicas", "the desired replica count is more than the maximum replica count"
	if maxReplicas > upLimit {
		highest, reason, message = upLimit, "ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate"
	}
	switch {
	case desired < minReplicas:
		return minReplicas, "TooFewReplicas", "the desired replica count is less than the minimum replica count"
	case desired > highest:
		return highest, reason, message
	}
	return desired, "DesiredWithinRange", "the desired count is within the acceptable range"
}

// defaultBehavior fills a behavior as kube-apiserver's defaulting does
// (kubeembed's too; another API server's may not have), and a scale-down
// window left unset with the controller's 300 s.
func defaultBehavior(b *autoscalingv2.HorizontalPodAutoscalerBehavior) {
	if b == nil {
		return
	}
	apidefaults.DefaultBehavior(b)
	if b.ScaleDown.StabilizationWindowSeconds == nil {
		b.ScaleDown.StabilizationWindowSeconds = ptr.To(int32(downscaleStabilisationWindow.Seconds()))
	}
}

// normalizeWithBehavior is the count of an HPA with a behavior: within
// the lowest recommendation of the scale-up window and the highest of the
// scale-down window, then within the policies' rates, minReplicas and
// maxReplicas; it sets AbleToScale and ScalingLimited.
func (c *Controller) normalizeWithBehavior(hpa *autoscalingv2.HorizontalPodAutoscaler, key string, current, desired, minReplicas int32, now time.Time) int32 {
	b := hpa.Spec.Behavior
	stable, reason, message := c.history.stabilizedWithBehavior(key, b, current, desired, now)
	if stable != desired {
		setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionTrue, reason, message, now)
	} else {
		setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionTrue, "ReadyForNewScale", "recommended size matches current size", now)
	}
	out, reason, message := c.history.withinRates(key, b, current, stable, minReplicas, hpa.Spec.MaxReplicas, now)
	limited := corev1.ConditionFalse
	if out != stable {
		limited = corev1.ConditionTrue
	}
	setCondition(hpa, autoscalingv2.ScalingLimited, limited, reason, message, now)
	return out
}

func (h *history) stabilizedWithBehavior(key string, b *autoscalingv2.HorizontalPodAutoscalerBehavior, current, desired int32, now time.Time) (int32, string, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	upCutoff := now.Add(-time.Duration(*b.ScaleUp.StabilizationWindowSeconds) * time.Second)
	downCutoff := now.Add(-time.Duration(*b.ScaleDown.StabilizationWindowSeconds) * time.Second)
	up, down, old := desired, desired, -1
	for i, r := range h.recommendations[key] {
		if r.at.After(upCutoff) {
			up = min(up, r.replicas)
		}
		if r.at.After(downCutoff) {
			down = max(down, r.replicas)
		}
		if r.at.Before(upCutoff) && r.at.Before(downCutoff) {
			old = i
		}
	}
	stable := min(max(current, up), down)
	h.record(key, old, recommendation{desired, now})
	if desired >= current {
		return stable, "ScaleUpStabilized", "recent recommendations were lower than current one, applying the lowest recent recommendation"
	}
	return stable, "ScaleDownStabilized", "recent recommendations were higher than current one, applying the highest recent recommendation"
}

// withinRates keeps desired within what the policies allow since the
// start of their periods, and minReplicas and maxReplicas.
func (h *history) withinRates(key string, b *autoscalingv2.HorizontalPodAutoscalerBehavior, current, desired, minReplicas, maxReplicas int32,
	now time.Time) (int32, string, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case desired > current:
		limit := max(scaleUpLimit(current, h.up[key], h.down[key], b.ScaleUp, now), current)
		highest, reason, message := maxReplicas, "TooManyReplicas", "the desired replica count is more than the maximum replica count"
		if maxReplicas > limit {
			highest, reason, message = limit, "ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate"
		}
		if desired > highest {
			return highest, reason, message
		}
	case desired < current:
		limit := min(scaleDownLimit(current, h.up[key], h.down[key], b.ScaleDown, now), current)
		lowest, reason, message := minReplicas, "TooFewReplicas", "the desired replica count is less than the minimum replica count"
		if minReplicas < limit {
			lowest, reason, message = limit, "ScaleDownLimit", "the desired replica count is decreasing faster than the maximum scale rate"
		}
		if desired < lowest {
			return lowest, reason, message
		}
	}
	return desired, "DesiredWithinRange", "the desired count is within the acceptable range"
}

// changedWithin sums the changes of events within the last period
// seconds.
func changedWithin(period int32, events []scaleEvent, now time.Time) int32 {
	cutoff := now.Add(-time.Duration(period) * time.Second)
	var sum int32
	for _, e := range events {
		if e.at.After(cutoff) {
			sum += e.change
		}
	}
	return sum
}

// scaleUpLimit is the most replicas the scale-up policies allow: the
// largest (selectPolicy Max) or smallest (Min) of their proposals from
// the count at the start of each one's period; current when Disabled.
func scaleUpLimit(current int32, up, down []scaleEvent, rules *autoscalingv2.HPAScalingRules, now time.Time) int32 {
	pick, result := func(a, b int32) int32 { return max(a, b) }, int32(math.MinInt32)
	switch *rules.SelectPolicy {
	case autoscalingv2.DisabledPolicySelect:
		return current
	case autoscalingv2.MinChangePolicySelect:
		pick, result = func(a, b int32) int32 { return min(a, b) }, math.MaxInt32
	}
	for _, p := range rules.Policies {
		start := current - changedWithin(p.PeriodSeconds, up, now) + changedWithin(p.PeriodSeconds, down, now)
		var proposed int32
		switch p.Type {
		case autoscalingv2.PodsScalingPolicy:
			proposed = start + p.Value
		case autoscalingv2.PercentScalingPolicy:
			proposed = int32(math.Ceil(float64(start) * (1 + float64(p.Value)/100)))
		}
		result = pick(result, proposed)
	}
	return result
}

// scaleDownLimit is the fewest replicas the scale-down policies allow.
func scaleDownLimit(current int32, up, down []scaleEvent, rules *autoscalingv2.HPAScalingRules, now time.Time) int32 {
	pick, result := func(a, b int32) int32 { return min(a, b) }, int32(math.MaxInt32)
	switch *rules.SelectPolicy {
	case autoscalingv2.DisabledPolicySelect:
		return current
	case autoscalingv2.MinChangePolicySelect:
		pick, result = func(a, b int32) int32 { return max(a, b) }, math.MinInt32
	}
	for _, p := range rules.Policies {
		start := current - changedWithin(p.PeriodSeconds, up, now) + changedWithin(p.PeriodSeconds, down, now)
		var proposed int32
		switch p.Type {
		case autoscalingv2.PodsScalingPolicy:
			proposed = start - p.Value
		case autoscalingv2.PercentScalingPolicy:
			proposed = int32(float64(start) * (1 - float64(p.Value)/100))
		}
		result = pick(result, proposed)
	}
	return result
}

// storeScaleEvent records a change of the target made under a behavior,
// in place of an event older than the direction's longest policy period.
func (h *history) storeScaleEvent(b *autoscalingv2.HorizontalPodAutoscalerBehavior, key string, from, to int32, now time.Time) {
	if b == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	events, rules, change := h.down, b.ScaleDown, from-to
	if to > from {
		events, rules, change = h.up, b.ScaleUp, to-from
	}
	var longest int32
	for _, p := range rules.Policies {
		longest = max(longest, p.PeriodSeconds)
	}
	cutoff := now.Add(-time.Duration(longest) * time.Second)
	old := -1
	for i := range events[key] {
		if events[key][i].at.Before(cutoff) {
			events[key][i].outdated = true
		}
		if events[key][i].outdated {
			old = i
		}
	}
	e := scaleEvent{change: change, at: now}
	if old >= 0 {
		events[key][old] = e
		return
	}
	events[key] = append(events[key], e)
}
