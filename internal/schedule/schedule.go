// Package schedule parses CronJob schedules once for the API's validation
// and the CronJob controller, as upstream shares
// ParseCronScheduleWithPanicRecovery: what validation accepts, the
// controller can schedule.
package schedule

import (
	"fmt"

	"github.com/robfig/cron/v3"
)

// Parse parses s with robfig/cron's standard parser (five fields or a
// descriptor such as @hourly or @every 1h, optionally behind TZ= or
// CRON_TZ=), as kube-apiserver and kube-controller-manager do; the
// parser's panics are errors ("invalid schedule format: ...").
func Parse(s string) (sched cron.Schedule, err error) {
	defer func() {
		if r := recover(); r != nil {
			sched, err = nil, fmt.Errorf("invalid schedule format: %v", r)
		}
	}()
	return cron.ParseStandard(s)
}
