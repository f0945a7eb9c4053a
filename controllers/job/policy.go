package job

// podFailurePolicy and successPolicy, as upstream matches them.

import (
	"fmt"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// matchPodFailurePolicy finds the first rule a failed pod matches: the
// Job's failure message (FailJob), whether the failure counts against the
// back-off limits (not for Ignore) and the rule's action ("" when none
// matches).
func matchPodFailurePolicy(pfp *batchv1.PodFailurePolicy, pod *corev1.Pod) (*string, bool, batchv1.PodFailurePolicyAction) {
	if pfp == nil {
		return nil, true, ""
	}
	for i, rule := range pfp.Rules {
		var msg string
		switch {
		case rule.OnExitCodes != nil:
			cs := matchExitCodes(&pod.Status, rule.OnExitCodes)
			if cs == nil {
				continue
			}
			msg = fmt.Sprintf("Container %s for pod %s/%s failed with exit code %v matching %v rule at index %d",
				cs.Name, pod.Namespace, pod.Name, cs.State.Terminated.ExitCode, rule.Action, i)
		case rule.OnPodConditions != nil:
			cond := matchPodConditions(&pod.Status, rule.OnPodConditions)
			if cond == nil {
				continue
			}
			msg = fmt.Sprintf("Pod %s/%s has condition %v matching %v rule at index %d", pod.Namespace, pod.Name, cond.Type, rule.Action, i)
		default:
			continue
		}
		switch rule.Action {
		case batchv1.PodFailurePolicyActionIgnore:
			return nil, false, rule.Action
		case batchv1.PodFailurePolicyActionFailIndex, batchv1.PodFailurePolicyActionCount:
			return nil, true, rule.Action
		case batchv1.PodFailurePolicyActionFailJob:
			return &msg, true, rule.Action
		}
	}
	return nil, true, ""
}

func matchExitCodes(s *corev1.PodStatus, req *batchv1.PodFailurePolicyOnExitCodesRequirement) *corev1.ContainerStatus {
	if cs := matchContainer(s.ContainerStatuses, req); cs != nil {
		return cs
	}
	return matchContainer(s.InitContainerStatuses, req)
}

func matchContainer(statuses []corev1.ContainerStatus, req *batchv1.PodFailurePolicyOnExitCodesRequirement) *corev1.ContainerStatus {
	for i := range statuses {
		cs := &statuses[i]
		t := cs.State.Terminated
		if t == nil || t.ExitCode == 0 || req.ContainerName != nil && *req.ContainerName != cs.Name {
			continue
		}
		in := slices.Contains(req.Values, t.ExitCode)
		if req.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn && in || req.Operator == batchv1.PodFailurePolicyOnExitCodesOpNotIn && !in {
			return cs
		}
	}
	return nil
}

func matchPodConditions(s *corev1.PodStatus, patterns []batchv1.PodFailurePolicyOnPodConditionsPattern) *corev1.PodCondition {
	for i := range s.Conditions {
		for _, p := range patterns {
			if s.Conditions[i].Type == p.Type && s.Conditions[i].Status == p.Status {
				return &s.Conditions[i]
			}
		}
	}
	return nil
}

// failJobMessage is the message of the first failed pod a FailJob rule
// matches.
func failJobMessage(j *batchv1.Job, pods []*corev1.Pod) *string {
	if j.Spec.PodFailurePolicy == nil {
		return nil
	}
	for _, p := range pods {
		if podFailed(p, j) {
			if msg, _, _ := matchPodFailurePolicy(j.Spec.PodFailurePolicy, p); msg != nil {
				return msg
			}
		}
	}
	return nil
}

// countedFailures are the failed pods not ignored by the policy.
func countedFailures(j *batchv1.Job, failed []*corev1.Pod) int {
	n := len(failed)
	if j.Spec.PodFailurePolicy == nil {
		return n
	}
	for _, p := range failed {
		if _, count, _ := matchPodFailurePolicy(j.Spec.PodFailurePolicy, p); !count {
			n--
		}
	}
	return n
}

// matchSuccessPolicy returns the message of the first rule the succeeded
// indexes meet.
func matchSuccessPolicy(sp *batchv1.SuccessPolicy, completions int, succeeded intervals) (string, bool) {
	if sp == nil || len(succeeded) == 0 {
		return "", false
	}
	for i, rule := range sp.Rules {
		switch {
		case rule.SucceededIndexes != nil:
			required := parseIntervals(*rule.SucceededIndexes, completions)
			if len(required) > 0 && meetsIndexesRule(required, succeeded, rule.SucceededCount) {
				return fmt.Sprintf("Matched rules at index %d", i), true
			}
		case rule.SucceededCount != nil && succeeded.total() >= int(*rule.SucceededCount):
			return fmt.Sprintf("Matched rules at index %d", i), true
		}
	}
	return "", false
}

// meetsIndexesRule: every required index succeeded, or at least count of
// them.
func meetsIndexesRule(required, succeeded intervals, count *int32) bool {
	overlap := 0
	for r, s := 0, 0; r < len(required) && s < len(succeeded); {
		overlap += max(0, min(required[r].last, succeeded[s].last)-max(required[r].first, succeeded[s].first)+1)
		switch {
		case succeeded[s].last < required[r].last:
			s++
		case succeeded[s].last > required[r].last:
			r++
		default:
			s++
			r++
		}
	}
	return overlap == required.total() || count != nil && overlap >= int(*count)
}
