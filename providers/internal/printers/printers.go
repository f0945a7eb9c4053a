// Package printers formats table cells as kubectl and kube-apiserver's
// printers do.
package printers

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
)

// Since renders the time since t as kubectl does ("<unknown>" for zero).
func Since(t metav1.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(time.Since(t.Time))
}
