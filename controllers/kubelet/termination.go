package kubelet

// A container's termination message, as the kubelet reads it when the
// container ends (kubelet v1.37.2, kuberuntime_container.go): what the
// process wrote to its terminationMessagePath (Exit.Message; the first
// 4,096 bytes), or, with terminationMessagePolicy FallbackToLogsOnError, for
// a failure that wrote nothing, the end of its log: its last 80 lines, at
// most their last 2,048 bytes.

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

const (
	maxPodTerminationMessages = 12 * 1024
	maxTerminationMessage     = 4096
	maxTerminationLogMessage  = 2048
	terminationLogLines       = 80
)

// terminationMessages reads the log for the termination message of each
// of the pod's container instances that ended since the last sync. Called
// with k.mu held (and takes the log streams' lock).
func (k *Kubelet) terminationMessages(pod *corev1.Pod, r *podRuntime) {
	for _, c := range r.all() {
		for _, i := range []*run{&c.instance, c.last} {
			if i == nil || !i.terminated() || i.messageRead {
				continue
			}
			i.messageRead = true
			if i.message == "" && i.exitCode != 0 && c.spec.TerminationMessagePolicy == corev1.TerminationMessageFallbackToLogsOnError {
				i.message = k.logTail(logTarget{pod: pod.Namespace + "/" + pod.Name, container: c.spec.Name, instance: i.id, first: firstInstance(c)})
			}
		}
	}
}

// logTail is the end of t's log as the kubelet reads it for a termination
// message.
func (k *Kubelet) logTail(t logTarget) string {
	lines, _ := k.streams.snapshot(t)
	var b strings.Builder
	for _, l := range lines[max(0, len(lines)-terminationLogLines):] {
		b.WriteString(l.text)
	}
	out := b.String()
	return out[max(0, len(out)-maxTerminationLogMessage):]
}
