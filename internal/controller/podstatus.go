package controller

import (
	"context"
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// PatchPodStatus writes status as pod's, as the kubelet and
// kube-controller-manager do (k8s.io/kubernetes/pkg/util/pod's
// PatchPodStatus): a strategic merge patch from the status read to
// status, with the pod's UID in it as a precondition. When there is
// nothing to change, nothing is sent and the pod is nil. An error wraps
// the server's (apierrors' predicates see it).
func PatchPodStatus(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod, status corev1.PodStatus) (*corev1.Pod, error) {
	if reflect.DeepEqual(pod.Status, status) {
		return nil, nil
	}
	patch, err := TwoWayPatch(&corev1.Pod{Status: pod.Status}, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: pod.UID}, Status: status})
	if err != nil {
		return nil, fmt.Errorf("patch status of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	if string(patch) == fmt.Sprintf(`{"metadata":{"uid":%q}}`, pod.UID) {
		return nil, nil
	}
	patched, err := client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return nil, fmt.Errorf("failed to patch status %q for pod %q/%q: %w", patch, pod.Namespace, pod.Name, err)
	}
	return patched, nil
}

// UpdatePodCondition sets condition in status as upstream's
// UpdatePodCondition (k8s.io/kubernetes/pkg/api/v1/pod): added, or put in
// place of the condition of its type, transitioning at now unless that
// one had its status. It reports whether anything changed.
func UpdatePodCondition(status *corev1.PodStatus, condition corev1.PodCondition, now metav1.Time) bool {
	condition.LastTransitionTime = now
	for i, old := range status.Conditions {
		if old.Type != condition.Type {
			continue
		}
		if old.Status == condition.Status {
			condition.LastTransitionTime = old.LastTransitionTime
		}
		// The observed generation is written but not compared, as
		// upstream's: a condition that differs only by it is no change.
		same := old.Status == condition.Status && old.Reason == condition.Reason && old.Message == condition.Message &&
			old.LastProbeTime.Equal(&condition.LastProbeTime) && old.LastTransitionTime.Equal(&condition.LastTransitionTime)
		status.Conditions[i] = condition
		return !same
	}
	status.Conditions = append(status.Conditions, condition)
	return true
}
