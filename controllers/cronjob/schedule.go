package cronjob

import (
	"errors"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
)

// nextScheduleDelta is how long after a schedule time the CronJob is
// synced again, as upstream.
const nextScheduleDelta = 100 * time.Millisecond

// tooManyMissed is how many missed schedule times make a warning.
const tooManyMissed = 100

// loadLocation loads a time zone; a variable so that a test can stand
// for a controller whose time zone database lacks one the API server has.
var loadLocation = time.LoadLocation

// formatSchedule is the schedule to parse: behind TZ= of spec.timeZone
// when that loads. A TZ the schedule names itself is warned about when
// events is set.
func formatSchedule(cj *batchv1.CronJob, events record.EventRecorder) string {
	if strings.Contains(cj.Spec.Schedule, "TZ") {
		if events != nil {
			events.Eventf(cj, corev1.EventTypeWarning, "UnsupportedSchedule", "CRON_TZ or TZ used in schedule %q is not officially supported, see https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details", cj.Spec.Schedule)
		}
		return cj.Spec.Schedule
	}
	if cj.Spec.TimeZone != nil {
		if _, err := loadLocation(*cj.Spec.TimeZone); err != nil {
			return cj.Spec.Schedule
		}
		return "TZ=" + *cj.Spec.TimeZone + " " + cj.Spec.Schedule
	}
	return cj.Spec.Schedule
}

// missed is what mostRecent found since the earliest time.
type missed struct {
	// earliest is where the search started: the last schedule time, the
	// creation, or now less the starting deadline.
	earliest time.Time
	// recent is the latest schedule time not after now, nil if none.
	recent *time.Time
	// count is how many schedule times were missed (0: at most one).
	count int64
}

// mostRecent finds the latest schedule time since the CronJob's last
// one (or its creation) that is not after now; with deadline, not
// before now less startingDeadlineSeconds either.
func mostRecent(cj *batchv1.CronJob, now time.Time, sched cron.Schedule, deadline bool) (missed, error) {
	m := missed{earliest: cj.CreationTimestamp.Time}
	if cj.Status.LastScheduleTime != nil {
		m.earliest = cj.Status.LastScheduleTime.Time
	}
	if d := cj.Spec.StartingDeadlineSeconds; deadline && d != nil {
		if limit := now.Add(-time.Duration(*d) * time.Second); limit.After(m.earliest) {
			m.earliest = limit
		}
	}
	t1 := sched.Next(m.earliest)
	t2 := sched.Next(t1)
	if now.Before(t1) {
		return m, nil
	}
	if now.Before(t2) {
		m.recent = &t1
		return m, nil
	}
	// Many times passed: skip to near the end instead of stepping
	// through each, assuming an even period.
	period := int64(t2.Sub(t1).Round(time.Second).Seconds())
	if period < 1 {
		return m, errors.New("time difference between two schedules is less than 1 second")
	}
	m.count = int64(now.Sub(t1).Seconds())/period + 1
	var last time.Time
	from := t1.Add(time.Duration((m.count-2)*period) * time.Second)
	for t := sched.Next(from); !t.After(now); t = sched.Next(t) {
		last = t
	}
	if !last.IsZero() {
		m.recent = &last
	}
	return m, nil
}

// nextSyncIn is how long from now until just after the next schedule
// time.
func nextSyncIn(cj *batchv1.CronJob, now time.Time, sched cron.Schedule) time.Duration {
	m, err := mostRecent(cj, now, sched, false)
	from := now
	switch {
	case err != nil:
	case m.recent != nil:
		from = *m.recent
	case m.count == 0:
		from = m.earliest
	}
	return sched.Next(from).Add(nextScheduleDelta).Sub(now)
}

// nextScheduleTime is the schedule time to start a Job for now, if any,
// warning when too many were missed.
func nextScheduleTime(cj *batchv1.CronJob, now time.Time, sched cron.Schedule, events record.EventRecorder) (*time.Time, error) {
	m, err := mostRecent(cj, now, sched, true)
	if m.recent == nil || m.recent.After(now) {
		return nil, err
	}
	if m.count > tooManyMissed {
		events.Eventf(cj, corev1.EventTypeWarning, "TooManyMissedTimes", "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew")
	}
	return m.recent, err
}
