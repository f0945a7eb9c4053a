// Package batch serves batch/v1 jobs (with status) and cronjobs (with
// status).
package batch

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver/providers"
	"github.com/kubeembed/apiserver/providers/internal/podspec"
	"github.com/kubeembed/apiserver/providers/internal/validation"
	"github.com/kubeembed/apiserver/providers/registry"
)

// Provider serves batch/v1.
func Provider() providers.Provider { return group }

var group = registry.Group{
	GroupVersion: batchv1.SchemeGroupVersion, AddToScheme: batchv1.AddToScheme,
	Served: []registry.Served{jobs, cronJobs},
}

func defaultJob(j *batchv1.Job) {
	defaultJobSpec(&j.Spec)
	if j.Spec.ManualSelector == nil {
		j.Spec.ManualSelector = ptr.To(false)
	}
	// A Job without labels takes its pod template's.
	if len(j.Labels) == 0 && j.Spec.Template.Labels != nil {
		j.Labels = j.Spec.Template.Labels
	}
}

func defaultJobSpec(s *batchv1.JobSpec) {
	if s.Completions == nil && s.Parallelism == nil {
		s.Completions, s.Parallelism = ptr.To[int32](1), ptr.To[int32](1)
	}
	if s.Parallelism == nil {
		s.Parallelism = ptr.To[int32](1)
	}
	if s.BackoffLimit == nil {
		limit := int32(6)
		if s.BackoffLimitPerIndex != nil {
			limit = math.MaxInt32
		}
		s.BackoffLimit = &limit
	}
	if s.CompletionMode == nil {
		s.CompletionMode = ptr.To(batchv1.NonIndexedCompletion)
	}
	if s.Suspend == nil {
		s.Suspend = ptr.To(false)
	}
	if s.PodReplacementPolicy == nil {
		p := batchv1.TerminatingOrFailed
		if s.PodFailurePolicy != nil {
			p = batchv1.Failed
		}
		s.PodReplacementPolicy = &p
	}
	if pfp := s.PodFailurePolicy; pfp != nil {
		for i := range pfp.Rules {
			for j := range pfp.Rules[i].OnPodConditions {
				if c := &pfp.Rules[i].OnPodConditions[j]; c.Status == "" {
					c.Status = corev1.ConditionTrue
				}
			}
		}
	}
	podspec.DefaultTemplate(&s.Template)
}

func defaultCronJob(c *batchv1.CronJob) {
	if c.Spec.ConcurrencyPolicy == "" {
		c.Spec.ConcurrencyPolicy = batchv1.AllowConcurrent
	}
	if c.Spec.Suspend == nil {
		c.Spec.Suspend = ptr.To(false)
	}
	if c.Spec.SuccessfulJobsHistoryLimit == nil {
		c.Spec.SuccessfulJobsHistoryLimit = ptr.To[int32](3)
	}
	if c.Spec.FailedJobsHistoryLimit == nil {
		c.Spec.FailedJobsHistoryLimit = ptr.To[int32](1)
	}
	// Only the pod template: kube-apiserver leaves the job spec inside a
	// CronJob to be defaulted when the Job is created.
	podspec.DefaultTemplate(&c.Spec.JobTemplate.Spec.Template)
}

var jobs = registry.Kind[*batchv1.Job]{
	Default: defaultJob,
	Status:  true, NoAge: true, Namespaced: true,
	GroupVersion: batchv1.SchemeGroupVersion, Categories: []string{"all"},
	Resource: "jobs", Singular: "job",
	// batch/v1 keeps a deleted Job's pods unless asked otherwise.
	OrphanByDefault: true,
	DeleteWarning:   "child pods are preserved by default when jobs are deleted; set propagationPolicy=Background to remove them or set propagationPolicy=Orphan to suppress this warning",
	NewObj:          func() runtime.Object { return &batchv1.Job{} },
	NewList:         func() runtime.Object { return &batchv1.JobList{} },
	GenerationOf:    func(j *batchv1.Job) any { return j.Spec },
	PrepareCreate:   generateSelector,
	Fields: func(j *batchv1.Job) fields.Set {
		return fields.Set{"status.successful": strconv.Itoa(int(j.Status.Succeeded))}
	},
	FieldNames: []string{"status.successful"},
	Validate:   func(j *batchv1.Job) field.ErrorList { return validateJobSpec(&j.Spec, field.NewPath("spec")) },
	ValidateUpdate: func(j, old *batchv1.Job) field.ErrorList {
		p := field.NewPath("spec")
		errs := apivalidation.ValidateImmutableField(j.Spec.Selector, old.Spec.Selector, p.Child("selector"))
		errs = append(errs, apivalidation.ValidateImmutableField(j.Spec.CompletionMode, old.Spec.CompletionMode, p.Child("completionMode"))...)
		if !(j.Spec.CompletionMode != nil && *j.Spec.CompletionMode == batchv1.IndexedCompletion) {
			errs = append(errs, apivalidation.ValidateImmutableField(j.Spec.Completions, old.Spec.Completions, p.Child("completions"))...)
		}
		// The template may only change (scheduling directives) while suspended.
		if old.Spec.Suspend == nil || !*old.Spec.Suspend {
			errs = append(errs, validation.Immutable(j.Spec.Template, old.Spec.Template, p.Child("template"))...)
		}
		return errs
	},
	ValidateStatus: func(j, _ *batchv1.Job) field.ErrorList {
		s := j.Status
		return validation.NonNegative(field.NewPath("status"), validation.N("active", s.Active), validation.N("succeeded", s.Succeeded), validation.N("failed", s.Failed))
	},
	Columns: []registry.Column{
		registry.ColumnOf("Status", "string", "Status of the job.", 0, jobStatus),
		registry.ColumnOf("Completions", "string", batchv1.JobStatus{}.SwaggerDoc()["succeeded"], 0, func(j *batchv1.Job) any {
			switch {
			case j.Spec.Completions != nil:
				return fmt.Sprintf("%d/%d", j.Status.Succeeded, *j.Spec.Completions)
			case j.Spec.Parallelism != nil && *j.Spec.Parallelism > 1:
				return fmt.Sprintf("%d/1 of %d", j.Status.Succeeded, *j.Spec.Parallelism)
			}
			return fmt.Sprintf("%d/1", j.Status.Succeeded)
		}),
		registry.ColumnOf("Duration", "string", "Time required to complete the job.", 0, func(j *batchv1.Job) any {
			switch {
			case j.Status.StartTime == nil:
				return ""
			case j.Status.CompletionTime == nil:
				return duration.HumanDuration(time.Since(j.Status.StartTime.Time))
			}
			return duration.HumanDuration(j.Status.CompletionTime.Sub(j.Status.StartTime.Time))
		}),
		registry.AgeColumn(),
		registry.TemplateColumns(1, func(j *batchv1.Job) *corev1.PodTemplateSpec { return &j.Spec.Template })[0],
		registry.TemplateColumns(1, func(j *batchv1.Job) *corev1.PodTemplateSpec { return &j.Spec.Template })[1],
		registry.SelectorColumn(batchv1.JobSpec{}.SwaggerDoc()["selector"], func(j *batchv1.Job) *metav1.LabelSelector { return j.Spec.Selector }),
	},
}

// jobStatus is the STATUS column, in kube-apiserver's precedence: Complete,
// Failed, Terminating (being deleted), Suspended, FailureTarget,
// SuccessCriteriaMet, else Running.
func jobStatus(j *batchv1.Job) any {
	switch {
	case hasJobCondition(j, batchv1.JobComplete):
		return "Complete"
	case hasJobCondition(j, batchv1.JobFailed):
		return "Failed"
	case j.DeletionTimestamp != nil:
		return "Terminating"
	}
	for _, c := range []batchv1.JobConditionType{batchv1.JobSuspended, batchv1.JobFailureTarget, batchv1.JobSuccessCriteriaMet} {
		if hasJobCondition(j, c) {
			return string(c)
		}
	}
	return "Running"
}

// hasJobCondition reports whether the first condition of type t is true,
// as kube-apiserver's printer reads it.
func hasJobCondition(j *batchv1.Job, t batchv1.JobConditionType) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func validateJobSpec(s *batchv1.JobSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Parallelism != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*s.Parallelism), p.Child("parallelism"))...)
	}
	if s.Completions != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*s.Completions), p.Child("completions"))...)
	}
	if s.BackoffLimit != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*s.BackoffLimit), p.Child("backoffLimit"))...)
	}
	if d := s.ActiveDeadlineSeconds; d != nil && *d <= 0 {
		errs = append(errs, field.Invalid(p.Child("activeDeadlineSeconds"), *d, "must be greater than 0"))
	}
	if t := s.TTLSecondsAfterFinished; t != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*t), p.Child("ttlSecondsAfterFinished"))...)
	}
	if m := s.CompletionMode; m != nil && *m != batchv1.NonIndexedCompletion && *m != batchv1.IndexedCompletion {
		errs = append(errs, field.NotSupported(p.Child("completionMode"), *m, []string{string(batchv1.NonIndexedCompletion), string(batchv1.IndexedCompletion)}))
	}
	if m := s.CompletionMode; m != nil && *m == batchv1.IndexedCompletion && s.Completions == nil {
		errs = append(errs, field.Required(p.Child("completions"), fmt.Sprintf("when completion mode is %s", batchv1.IndexedCompletion)))
	}
	if s.Selector == nil {
		errs = append(errs, field.Required(p.Child("selector"), ""))
	} else {
		errs = append(errs, metav1validation.ValidateLabelSelector(s.Selector, metav1validation.LabelSelectorValidationOptions{}, p.Child("selector"))...)
	}
	// A missing selector selects nothing: its template's labels do not
	// match it either, as kube-apiserver says.
	if sel, err := metav1.LabelSelectorAsSelector(s.Selector); err == nil && !sel.Matches(labels.Set(s.Template.Labels)) {
		errs = append(errs, field.Invalid(p.Child("template", "metadata", "labels"), s.Template.Labels, "`selector` does not match template `labels`"))
	}
	errs = append(errs, validatePodFailurePolicy(s, p)...)
	errs = append(errs, podspec.ValidateTemplate(&s.Template, p.Child("template"))...)
	switch rp := s.Template.Spec.RestartPolicy; rp {
	case corev1.RestartPolicyOnFailure:
		if s.PodFailurePolicy != nil {
			errs = append(errs, field.Invalid(p.Child("template", "spec", "restartPolicy"), rp,
				fmt.Sprintf("only %q is supported when podFailurePolicy is specified", corev1.RestartPolicyNever)))
		}
	case corev1.RestartPolicyNever:
	case corev1.RestartPolicyAlways, "":
		// Always is also what the pod defaults give when none is set.
		errs = append(errs, field.Required(p.Child("template", "spec", "restartPolicy"),
			fmt.Sprintf("valid values: %q, %q", corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever)))
	default:
		errs = append(errs, field.NotSupported(p.Child("template", "spec", "restartPolicy"), rp,
			[]string{string(corev1.RestartPolicyOnFailure), string(corev1.RestartPolicyNever)}))
	}
	return errs
}

// generateSelector gives a Job without manualSelector a selector on its UID
// and the matching pod labels, as kube-apiserver does on create.
func generateSelector(_ context.Context, j *batchv1.Job) {
	if j.Spec.ManualSelector != nil && *j.Spec.ManualSelector {
		return
	}
	uid := string(j.UID)
	if j.Spec.Template.Labels == nil {
		j.Spec.Template.Labels = map[string]string{}
	}
	for k, v := range map[string]string{
		"controller-uid": uid, batchv1.ControllerUidLabel: uid,
		"job-name": j.Name, batchv1.JobNameLabel: j.Name,
	} {
		j.Spec.Template.Labels[k] = v
	}
	if j.Spec.Selector == nil {
		j.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{batchv1.ControllerUidLabel: uid}}
	}
}
