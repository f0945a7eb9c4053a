package replicaset

// Which pods a ReplicaSet deletes first: upstream's ActivePodsWithRanks,
// with pod deletion cost (on in v1.37) and logarithmic scale-down (always
// on).

import (
	"math"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeembed/apiserver/internal/controller"
)

// ranked are a ReplicaSet's pods with, for each, how many related active
// pods share its node.
type ranked struct {
	pods  []*corev1.Pod
	ranks []int
	now   time.Time
}

func (r ranked) Len() int { return len(r.pods) }
func (r ranked) Swap(i, j int) {
	r.pods[i], r.pods[j] = r.pods[j], r.pods[i]
	r.ranks[i], r.ranks[j] = r.ranks[j], r.ranks[i]
}

var phaseOrder = map[corev1.PodPhase]int{corev1.PodPending: 0, corev1.PodUnknown: 1, corev1.PodRunning: 2}

// Less: pod i goes before pod j.
func (r ranked) Less(i, j int) bool {
	a, b := r.pods[i], r.pods[j]
	if a.Spec.NodeName != b.Spec.NodeName && (a.Spec.NodeName == "" || b.Spec.NodeName == "") {
		return a.Spec.NodeName == ""
	}
	if pa, pb := phaseOrder[a.Status.Phase], phaseOrder[b.Status.Phase]; pa != pb {
		return pa < pb
	}
	if ra, rb := controller.PodReady(a), controller.PodReady(b); ra != rb {
		return !ra
	}
	if ca, cb := deletionCost(a), deletionCost(b); ca != cb {
		return ca < cb
	}
	if r.ranks[i] != r.ranks[j] {
		return r.ranks[i] > r.ranks[j]
	}
	if controller.PodReady(a) {
		ta, tb := controller.PodReadySince(a), controller.PodReadySince(b)
		if !ta.Equal(tb) {
			return r.newer(ta, tb, a, b)
		}
	}
	if ra, rb := restarts(a.Status.ContainerStatuses, nil), restarts(b.Status.ContainerStatuses, nil); ra != rb {
		return ra > rb
	}
	if ra, rb := restarts(a.Status.InitContainerStatuses, sidecars(a)), restarts(b.Status.InitContainerStatuses, sidecars(b)); ra != rb {
		return ra > rb
	}
	if ta, tb := a.CreationTimestamp.Time, b.CreationTimestamp.Time; !ta.Equal(tb) {
		return r.newer(ta, tb, a, b)
	}
	return false
}

// newer orders two different times: a zero one first, then the one in the
// lower power-of-two bucket of age (the newer), then the lower uid.
func (r ranked) newer(ta, tb time.Time, a, b *corev1.Pod) bool {
	if ta.IsZero() || tb.IsZero() {
		return ta.IsZero()
	}
	if ba, bb := r.bucket(ta), r.bucket(tb); ba != bb {
		return ba < bb
	}
	return a.UID < b.UID
}

func (r ranked) bucket(t time.Time) int64 {
	d := r.now.Sub(t)
	if d <= 0 {
		return -1
	}
	return int64(math.Log2(float64(d)))
}

// deletionCost is the pod's controller.kubernetes.io/pod-deletion-cost:
// 0 when missing or not an int32 written plainly.
func deletionCost(pod *corev1.Pod) int32 {
	v, ok := pod.Annotations[corev1.PodDeletionCost]
	if !ok || v == "" || !(v[0] == '-' || v == "0" || v[0] >= '1' && v[0] <= '9') {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0
	}
	return int32(n)
}

// sidecars are the names of the pod's restartable init containers.
func sidecars(pod *corev1.Pod) map[string]bool {
	s := map[string]bool{}
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			s[c.Name] = true
		}
	}
	return s
}

// restarts is the highest restart count of statuses (of only those named
// in only, when given).
func restarts(statuses []corev1.ContainerStatus, only map[string]bool) int32 {
	var n int32
	for _, s := range statuses {
		if only != nil && !only[s.Name] {
			continue
		}
		n = max(n, s.RestartCount)
	}
	return n
}

func seconds(s int32) time.Duration { return time.Duration(s) * time.Second }
