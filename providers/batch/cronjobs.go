package batch

import (
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubeembed/apiserver/providers/internal/printers"
	"github.com/kubeembed/apiserver/providers/registry"

	"github.com/kubeembed/apiserver/internal/schedule"
)

var cronJobs = registry.Kind[*batchv1.CronJob]{
	Default: defaultCronJob,
	Status:  true, NoAge: true, Namespaced: true,
	GroupVersion: batchv1.SchemeGroupVersion, Categories: []string{"all"},
	Resource: "cronjobs", Singular: "cronjob", ShortNames: []string{"cj"},
	NewObj:       func() runtime.Object { return &batchv1.CronJob{} },
	NewList:      func() runtime.Object { return &batchv1.CronJobList{} },
	GenerationOf: func(c *batchv1.CronJob) any { return c.Spec },
	Validate:     validateCronJob,
	Columns: []registry.Column{
		registry.ColumnOf("Schedule", "string", "The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron.", 0, func(c *batchv1.CronJob) any { return c.Spec.Schedule }),
		registry.ColumnOf("Timezone", "string", batchv1.CronJobSpec{}.SwaggerDoc()["timeZone"], 0, func(c *batchv1.CronJob) any {
			if c.Spec.TimeZone == nil {
				return "<none>"
			}
			return *c.Spec.TimeZone
		}),
		registry.ColumnOf("Suspend", "boolean", batchv1.CronJobSpec{}.SwaggerDoc()["suspend"], 0, func(c *batchv1.CronJob) any {
			// Printed as a word, as kube-apiserver's printer does.
			if c.Spec.Suspend != nil && *c.Spec.Suspend {
				return "True"
			}
			return "False"
		}),
		registry.ColumnOf("Active", "integer", "A list of pointers to currently running jobs.", 0, func(c *batchv1.CronJob) any { return int64(len(c.Status.Active)) }),
		registry.ColumnOf("Last Schedule", "string", "Information when was the last time the job was successfully scheduled.", 0, func(c *batchv1.CronJob) any {
			if c.Status.LastScheduleTime == nil {
				return "<none>"
			}
			return printers.Since(*c.Status.LastScheduleTime)
		}),
		registry.AgeColumn(),
		registry.TemplateColumns(1, cronJobTemplate)[0],
		registry.TemplateColumns(1, cronJobTemplate)[1],
		registry.SelectorColumn(batchv1.JobSpec{}.SwaggerDoc()["selector"], func(c *batchv1.CronJob) *metav1.LabelSelector { return c.Spec.JobTemplate.Spec.Selector }),
	},
}

func validateCronJob(c *batchv1.CronJob) field.ErrorList {
	p := field.NewPath("spec")
	var errs field.ErrorList
	// Job names are the CronJob's name plus an 11-character suffix.
	if len(c.Name) > 52 {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), c.Name, "must be no more than 52 characters"))
	}
	if c.Spec.Schedule == "" {
		errs = append(errs, field.Required(p.Child("schedule"), ""))
	} else {
		if err := validateSchedule(c.Spec.Schedule); err != nil {
			errs = append(errs, field.Invalid(p.Child("schedule"), c.Spec.Schedule, err.Error()))
		}
		// kube-apiserver keeps TZ in a schedule only for CronJobs that
		// had it before it was refused; none is stored here.
		if strings.Contains(c.Spec.Schedule, "TZ") {
			errs = append(errs, field.Invalid(p.Child("schedule"), c.Spec.Schedule, "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"))
		}
	}
	if tz := c.Spec.TimeZone; tz != nil {
		if _, err := time.LoadLocation(*tz); err != nil || strings.EqualFold(*tz, "local") {
			errs = append(errs, field.Invalid(p.Child("timeZone"), *tz, "unknown time zone "+*tz))
		}
	}
	switch c.Spec.ConcurrencyPolicy {
	case batchv1.AllowConcurrent, batchv1.ForbidConcurrent, batchv1.ReplaceConcurrent:
	default:
		errs = append(errs, field.NotSupported(p.Child("concurrencyPolicy"), c.Spec.ConcurrencyPolicy,
			[]string{string(batchv1.AllowConcurrent), string(batchv1.ForbidConcurrent), string(batchv1.ReplaceConcurrent)}))
	}
	for name, v := range map[string]*int32{"successfulJobsHistoryLimit": c.Spec.SuccessfulJobsHistoryLimit, "failedJobsHistoryLimit": c.Spec.FailedJobsHistoryLimit} {
		if v != nil {
			errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*v), p.Child(name))...)
		}
	}
	if d := c.Spec.StartingDeadlineSeconds; d != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(*d, p.Child("startingDeadlineSeconds"))...)
	}
	// The job template's selector is generated per Job; validate the rest.
	spec := c.Spec.JobTemplate.Spec.DeepCopy()
	if spec.Selector == nil {
		spec.Selector = &metav1.LabelSelector{}
	}
	for _, e := range validateJobSpec(spec, p.Child("jobTemplate", "spec")) {
		if !strings.HasSuffix(e.Field, ".selector") && !strings.HasSuffix(e.Field, "template.metadata.labels") {
			errs = append(errs, e)
		}
	}
	return errs
}

// validateSchedule checks a schedule as kube-apiserver does, with the
// CronJob controller's parser.
func validateSchedule(s string) error {
	_, err := schedule.Parse(s)
	return err
}

func cronJobTemplate(c *batchv1.CronJob) *corev1.PodTemplateSpec {
	return &c.Spec.JobTemplate.Spec.Template
}
