package core

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubeembed/apiserver/providers/registry"
)

var resourceQuotas = registry.Kind[*corev1.ResourceQuota]{
	GroupVersion: corev1.SchemeGroupVersion, Resource: "resourcequotas", Singular: "resourcequota",
	ShortNames: []string{"quota"}, Namespaced: true, Status: true, ReturnDeleted: true,
	NewObj:  func() runtime.Object { return &corev1.ResourceQuota{} },
	NewList: func() runtime.Object { return &corev1.ResourceQuotaList{} },
	// Create and update check the status too (which they keep as it was,
	// or empty), as kube-apiserver's validation does.
	Validate: func(q *corev1.ResourceQuota) field.ErrorList {
		return append(validateQuotaSpec(&q.Spec), validateQuotaStatus(q, nil)...)
	},
	ValidateUpdate: validateQuotaUpdate,
	ValidateStatus: validateQuotaStatus,
	Columns: []registry.Column{
		registry.ColumnOf("Request", "string", "Request represents a minimum amount of cpu/memory that a container may consume.", 0, func(q *corev1.ResourceQuota) any {
			return quotaSummary(q, func(n corev1.ResourceName) bool { return !strings.HasPrefix(string(n), "limits.") })
		}),
		registry.ColumnOf("Limit", "string", "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node.", 0, func(q *corev1.ResourceQuota) any {
			return quotaSummary(q, func(n corev1.ResourceName) bool { return strings.HasPrefix(string(n), "limits.") })
		}),
	},
}

// quotaSummary is "name: used/hard, ..." over the enforced hard limits (in
// status, written by the quota controller) keep selects, sorted by name.
func quotaSummary(q *corev1.ResourceQuota, keep func(corev1.ResourceName) bool) string {
	var names []string
	for n := range q.Status.Hard {
		if keep(n) {
			names = append(names, string(n))
		}
	}
	slices.Sort(names)
	var parts []string
	for _, n := range names {
		hard := q.Status.Hard[corev1.ResourceName(n)]
		used := q.Status.Used[corev1.ResourceName(n)]
		parts = append(parts, fmt.Sprintf("%s: %s/%s", n, used.String(), hard.String()))
	}
	return strings.Join(parts, ", ")
}
