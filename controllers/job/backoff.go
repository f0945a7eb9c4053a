package job

// The exponential back-off before failed pods are replaced: per Job, the
// failures since the last success and when the last one was.

import (
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// Upstream's DefaultJobPodFailureBackOff and MaxJobPodFailureBackOff.
const (
	podFailureBackoff    = 10 * time.Second
	maxPodFailureBackoff = 10 * time.Minute
	// batchPeriod is upstream's SyncJobBatchPeriod, the least delay of a
	// delayed sync.
	batchPeriod = time.Second
)

type backoffRecord struct {
	key             string
	failures        int32 // since the last success
	lastFailureTime *time.Time
}

type backoffStore struct {
	mu      sync.Mutex
	records map[string]backoffRecord
}

func newBackoffStore() *backoffStore { return &backoffStore{records: map[string]backoffRecord{}} }

func (s *backoffStore) update(r backoffRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records[r.key] = r
}

func (s *backoffStore) remove(k string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.records, k)
}

// next is the Job's record once the newly finished pods are counted.
func (s *backoffStore) next(k string, succeeded, failed []*corev1.Pod) backoffRecord {
	s.mu.Lock()
	r, ok := s.records[k]
	s.mu.Unlock()
	if !ok {
		r = backoffRecord{key: k}
	}
	sortByFinished(succeeded)
	sortByFinished(failed)
	switch {
	case len(failed) == 0 && len(succeeded) == 0:
	case len(succeeded) == 0:
		r.failures += int32(len(failed))
		r.lastFailureTime = ptr.To(finishedAt(failed[len(failed)-1]))
	default:
		r.failures, r.lastFailureTime = 0, nil
		lastSuccess := finishedAt(succeeded[len(succeeded)-1])
		for i := len(failed) - 1; i >= 0; i-- {
			at := finishedAt(failed[i])
			if !at.After(lastSuccess) {
				break
			}
			if r.lastFailureTime == nil {
				r.lastFailureTime = &at
			}
			r.failures++
		}
	}
	return r
}

func sortByFinished(pods []*corev1.Pod) {
	sort.Slice(pods, func(i, j int) bool { return finishedAt(pods[i]).Before(finishedAt(pods[j])) })
}

// finishedAt is when a pod finished: its containers' last finish, its
// Ready condition's turn to false, its deletion, else its creation.
func finishedAt(p *corev1.Pod) time.Time {
	if t := containersFinished(p); t != nil {
		return *t
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionFalse && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time
		}
	}
	if p.DeletionTimestamp != nil {
		return p.DeletionTimestamp.Add(-time.Duration(ptr.Deref(p.DeletionGracePeriodSeconds, 0)) * time.Second)
	}
	return p.CreationTimestamp.Time
}

// containersFinished is the latest finish of the regular containers
// (nil if one has not finished), then of that and the sidecars', as
// upstream's getFinishTimeFromContainers.
func containersFinished(p *corev1.Pod) *time.Time {
	sidecars := map[string]bool{}
	for _, c := range p.Spec.InitContainers {
		if ptr.Deref(c.RestartPolicy, "") == corev1.ContainerRestartPolicyAlways {
			sidecars[c.Name] = true
		}
	}
	latest := latestFinish(nil, p.Status.ContainerStatuses, nil)
	return latestFinish(latest, p.Status.InitContainerStatuses, sidecars)
}

// latestFinish is the latest of prev and the statuses' finishes (only
// those in only, when set), nil if one of them has not finished.
func latestFinish(prev *time.Time, statuses []corev1.ContainerStatus, only map[string]bool) *time.Time {
	latest := prev
	for _, s := range statuses {
		if only != nil && !only[s.Name] {
			continue
		}
		t := s.State.Terminated
		if t == nil || t.FinishedAt.IsZero() {
			return nil
		}
		if latest == nil || latest.Before(t.FinishedAt.Time) {
			latest = &t.FinishedAt.Time
		}
	}
	return latest
}

// remaining is how long until a pod may be created after failures, the
// last at last.
func remaining(clk clock.PassiveClock, failures int32, last *time.Time) time.Duration {
	if failures == 0 || last == nil {
		return 0
	}
	d := podFailureBackoff
	for i := 1; i < int(failures); i++ {
		d *= 2
		if d >= maxPodFailureBackoff {
			d = maxPodFailureBackoff
			break
		}
	}
	if elapsed := clk.Since(*last); d > elapsed {
		return d - elapsed
	}
	return 0
}

// remainingForIndex is the back-off of an index whose last failed pod is
// last (nil: none).
func remainingForIndex(clk clock.PassiveClock, last *corev1.Pod) time.Duration {
	if last == nil {
		return 0
	}
	at := finishedAt(last)
	return remaining(clk, absoluteFailures(last)+1, &at)
}
