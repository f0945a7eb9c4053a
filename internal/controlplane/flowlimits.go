package controlplane

// The seat limits of a server's priority levels: nominal, lower and upper
// from their configuration and the server's concurrency limit, current from
// priority and fairness itself.

import (
	"math"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/labels"
	fcmetrics "k8s.io/apiserver/pkg/util/flowcontrol/metrics"
	flowcontrollisters "k8s.io/client-go/listers/flowcontrol/v1"
)

// seatLimits are apiserver_flowcontrol_{nominal,lower,upper,current}_limit_seats
// of the priority levels priority and fairness has taken in: it makes a
// level's seat gauge (observe) when it does, so a new
// PriorityLevelConfiguration is reported once it is in force, not when
// the informer has it. The configured limits are computed when scraped as
// upstream's configuration controller derives them; the current limit,
// which it moves every 10 s as levels borrow seats from one another, is
// the denominator it sets on the level's seat gauge.
type seatLimits struct {
	levels flowcontrollisters.PriorityLevelConfigurationLister
	server int // the server's concurrency limit
	mu     sync.Mutex
	gauges map[string]*limitGauge // by priority level
}

func newSeatLimits(levels flowcontrollisters.PriorityLevelConfigurationLister, serverConcurrencyLimit int) *seatLimits {
	return &seatLimits{levels: levels, server: serverConcurrencyLimit, gauges: map[string]*limitGauge{}}
}

// observe returns vec noting the gauges it makes in l.
func (l *seatLimits) observe(vec fcmetrics.RatioedGaugeVec) fcmetrics.RatioedGaugeVec {
	return seatGaugeVec{RatioedGaugeVec: vec, limits: l}
}

type seatGaugeVec struct {
	fcmetrics.RatioedGaugeVec
	limits *seatLimits
}

// NewForLabelValuesSafe implements fcmetrics.RatioedGaugeVec; the only
// label is the priority level.
func (v seatGaugeVec) NewForLabelValuesSafe(numerator, denominator float64, labelValues []string) fcmetrics.RatioedGauge {
	g := &limitGauge{RatioedGauge: v.RatioedGaugeVec.NewForLabelValuesSafe(numerator, denominator, labelValues)}
	g.denominator.Store(math.Float64bits(denominator))
	v.limits.mu.Lock()
	v.limits.gauges[labelValues[0]] = g
	v.limits.mu.Unlock()
	return g
}

var (
	nominalSeatsDesc = limitDesc("nominal_limit_seats", "[BETA] Nominal number of execution seats configured for each priority level")
	lowerSeatsDesc   = limitDesc("lower_limit_seats", "[ALPHA] Configured lower bound on number of execution seats available to each priority level")
	upperSeatsDesc   = limitDesc("upper_limit_seats", "[ALPHA] Configured upper bound on number of execution seats available to each priority level")
	currentSeatsDesc = limitDesc("current_limit_seats", "[ALPHA] current derived number of execution seats available to each priority level")
)

func limitDesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName("apiserver", "flowcontrol", name), help, []string{"priority_level"}, nil)
}

// Describe implements prometheus.Collector.
func (l *seatLimits) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{nominalSeatsDesc, lowerSeatsDesc, upperSeatsDesc, currentSeatsDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (l *seatLimits) Collect(ch chan<- prometheus.Metric) {
	levels, err := l.levels.List(labels.Everything())
	if err != nil {
		return
	}
	var shares float64
	for _, pl := range levels {
		shares += float64(nominalShares(pl))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, pl := range levels {
		g, ok := l.gauges[pl.Name]
		if !ok || shares == 0 {
			continue // not in force yet
		}
		nominal, lower, upper := l.configured(pl, shares)
		for desc, v := range map[*prometheus.Desc]int{nominalSeatsDesc: nominal, lowerSeatsDesc: lower, upperSeatsDesc: upper,
			currentSeatsDesc: l.current(pl, g, lower, upper)} {
			ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, float64(v), pl.Name)
		}
	}
}

// configured are a level's nominal seats (its share of the server's, by
// nominal concurrency shares, rounded up), and its bounds: less the seats
// it may lend, plus those it may borrow (without a borrowing limit, as
// many as the server has).
func (l *seatLimits) configured(pl *flowcontrolv1.PriorityLevelConfiguration, shares float64) (nominal, lower, upper int) {
	nominal = int(math.Ceil(float64(l.server) * float64(nominalShares(pl)) / shares))
	var lendable, borrowable *int32
	if pl.Spec.Limited != nil {
		lendable, borrowable = pl.Spec.Limited.LendablePercent, pl.Spec.Limited.BorrowingLimitPercent
	} else if pl.Spec.Exempt != nil {
		lendable = pl.Spec.Exempt.LendablePercent
	}
	percent := func(p *int32) int { return int(math.Round(float64(nominal) * float64(*p) / 100)) }
	lower, upper = nominal, nominal+l.server
	if lendable != nil {
		lower -= percent(lendable)
	}
	if borrowable != nil {
		upper = nominal + percent(borrowable)
	}
	return nominal, lower, upper
}

// current is the level's current limit, the denominator of its seat
// gauge; except that a limit of 0 has for denominator a tenth of the
// server's limit (so that ratios stay finite). That value is read as 0
// where the level cannot have it: an exempt level (its current limit is
// the most seats it used in the last 10 s, 0 when idle) or one whose
// bounds exclude it. Left ambiguous: a limited level with a lower bound
// of 0 whose bounds include a tenth of the server's limit.
func (l *seatLimits) current(pl *flowcontrolv1.PriorityLevelConfiguration, g *limitGauge, lower, upper int) int {
	d := int(math.Round(g.get()))
	if d != max(1, int(math.Round(float64(l.server)/10))) {
		return d
	}
	if pl.Spec.Type == flowcontrolv1.PriorityLevelEnablementExempt || d < lower || d > upper {
		return 0
	}
	return d
}

func nominalShares(pl *flowcontrolv1.PriorityLevelConfiguration) int32 {
	switch {
	case pl.Spec.Limited != nil && pl.Spec.Limited.NominalConcurrencyShares != nil:
		return *pl.Spec.Limited.NominalConcurrencyShares
	case pl.Spec.Exempt != nil && pl.Spec.Exempt.NominalConcurrencyShares != nil:
		return *pl.Spec.Exempt.NominalConcurrencyShares
	}
	return 0
}
