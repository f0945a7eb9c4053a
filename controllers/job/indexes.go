package job

// Indexed Jobs: completion indexes, sets of them as ordered intervals
// ("1,3-5,7"), and the per-index failure counts of backoffLimitPerIndex.

import (
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
)

const (
	unknownIndex  = -1
	indexEnv      = "JOB_COMPLETION_INDEX"
	maxGenerated  = 63 - 5 // apiserver's names.MaxGeneratedNameLength
	indexedPrefix = "-"
)

func indexed(j *batchv1.Job) bool {
	return ptr.Deref(j.Spec.CompletionMode, batchv1.NonIndexedCompletion) == batchv1.IndexedCompletion
}

func perIndex(j *batchv1.Job) bool { return j.Spec.BackoffLimitPerIndex != nil }

func completions(j *batchv1.Job) int { return int(ptr.Deref(j.Spec.Completions, 0)) }

type interval struct{ first, last int }

// intervals are sorted, disjoint, non-adjacent intervals.
type intervals []interval

func (oi intervals) withIndexes(ixs []int) intervals {
	add := make(intervals, len(ixs))
	for i, ix := range ixs {
		add[i] = interval{ix, ix}
	}
	return oi.merge(add)
}

func (oi intervals) merge(other intervals) intervals {
	var out intervals
	appendOne := func(iv interval) {
		switch n := len(out); {
		case n == 0 || iv.first > out[n-1].last+1:
			out = append(out, iv)
		case out[n-1].last < iv.last:
			out[n-1].last = iv.last
		}
	}
	i, j := 0, 0
	for i < len(oi) && j < len(other) {
		if oi[i].first < other[j].first {
			appendOne(oi[i])
			i++
		} else {
			appendOne(other[j])
			j++
		}
	}
	for ; i < len(oi); i++ {
		appendOne(oi[i])
	}
	for ; j < len(other); j++ {
		appendOne(other[j])
	}
	return out
}

func (oi intervals) total() int {
	n := 0
	for _, iv := range oi {
		n += iv.last - iv.first + 1
	}
	return n
}

func (oi intervals) String() string {
	var b strings.Builder
	for _, iv := range oi {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(iv.first))
		switch {
		case iv.last == iv.first+1:
			b.WriteByte(',')
			b.WriteString(strconv.Itoa(iv.last))
		case iv.last > iv.first:
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(iv.last))
		}
	}
	return b.String()
}

func (oi intervals) has(ix int) bool {
	i := sort.Search(len(oi), func(i int) bool { return oi[i].last >= ix })
	return i < len(oi) && oi[i].first <= ix
}

// parseIntervals reads "1,3-5" up to completions, skipping corrupt parts.
func parseIntervals(s string, completions int) intervals {
	if s == "" {
		return nil
	}
	var out intervals
	for _, part := range strings.Split(s, ",") {
		limits := strings.Split(part, "-")
		first, err := strconv.Atoi(limits[0])
		if err != nil {
			continue
		}
		if first >= completions {
			break
		}
		last := first
		if len(limits) > 1 {
			if last, err = strconv.Atoi(limits[1]); err != nil {
				continue
			}
			last = min(last, completions-1)
		}
		if n := len(out); n > 0 && out[n-1].last == first-1 {
			out[n-1].last = last
		} else {
			out = append(out, interval{first, last})
		}
	}
	return out
}

// completionIndex is a pod's index annotation, unknownIndex if none or bad.
func completionIndex(p *corev1.Pod) int {
	v, ok := p.Annotations[batchv1.JobCompletionIndexAnnotation]
	if !ok {
		return unknownIndex
	}
	i, err := strconv.Atoi(v)
	if err != nil || i < 0 {
		return unknownIndex
	}
	return i
}

// validIndex: the pod has an index below the Job's completions.
func validIndex(j *batchv1.Job, p *corev1.Pod) bool {
	ix := completionIndex(p)
	return ix != unknownIndex && ix < completions(j)
}

func indexesOf(pods []*corev1.Pod) sets.Set[int] {
	out := sets.New[int]()
	for _, p := range pods {
		if ix := completionIndex(p); ix != unknownIndex {
			out.Insert(ix)
		}
	}
	return out
}

// succeededIndexes are the indexes the status counts and, with them,
// those of the succeeded pods still to count.
func succeededIndexes(j *batchv1.Job, pods []*corev1.Pod) (prev, cur intervals) {
	prev = parseIntervals(j.Status.CompletedIndexes, completions(j))
	fresh := sets.New[int]()
	for _, p := range pods {
		if p.Status.Phase == corev1.PodSucceeded && validIndex(j, p) && hasFinalizer(p) {
			fresh.Insert(completionIndex(p))
		}
	}
	return prev, prev.withIndexes(sets.List(fresh))
}

// failedIndexesOf are the status's failed indexes and those of pods that
// failed their index.
func failedIndexesOf(j *batchv1.Job, pods []*corev1.Pod) *intervals {
	var prev intervals
	if j.Status.FailedIndexes != nil {
		prev = parseIntervals(*j.Status.FailedIndexes, completions(j))
	}
	fresh := sets.New[int]()
	for _, p := range pods {
		if validIndex(j, p) && hasFinalizer(p) && indexFailed(j, p) {
			fresh.Insert(completionIndex(p))
		}
	}
	out := prev.withIndexes(sets.List(fresh))
	return &out
}

// indexFailed: the pod's failure fails its index (FailIndex, or its
// counted failures reach backoffLimitPerIndex).
func indexFailed(j *batchv1.Job, p *corev1.Pod) bool {
	if !podFailed(p, j) {
		return false
	}
	counted := true
	if j.Spec.PodFailurePolicy != nil {
		_, count, action := matchPodFailurePolicy(j.Spec.PodFailurePolicy, p)
		if action == batchv1.PodFailurePolicyActionFailIndex {
			return true
		}
		counted = count
	}
	return counted && annotationCount(p, batchv1.JobIndexFailureCountAnnotation) >= *j.Spec.BackoffLimitPerIndex
}

// firstPendingIndexes are the first count indexes below completions
// neither succeeded, active, failed nor (podReplacementPolicy Failed)
// terminating.
func firstPendingIndexes(jc *syncCtx, count, completions int) []int {
	if count == 0 {
		return nil
	}
	busy := jc.succeededIdx.withIndexes(sets.List(indexesOf(jc.active)))
	if onlyReplaceFailed(jc.job) {
		busy = busy.withIndexes(sets.List(indexesOf(terminatingOf(jc.pods))))
	}
	if jc.failedIdx != nil {
		busy = busy.merge(*jc.failedIdx)
	}
	out := make([]int, 0, count)
	next := 0
	for _, iv := range busy {
		for ; next < completions && len(out) < count && next < iv.first; next++ {
			out = append(out, next)
		}
		next = max(next, iv.last+1)
	}
	for ; next < completions && len(out) < count; next++ {
		out = append(out, next)
	}
	return out
}

// duplicatesForRemoval adds to rm the pods without index or with one out
// of range, and all but the best pod of each repeated index; left are the
// others.
func duplicatesForRemoval(pods []*corev1.Pod, completions int) (rm, left []*corev1.Pod) {
	pods = slices.Clone(pods)
	sortByIndex(pods)
	start := 0
	for i := 1; i <= len(pods); i++ {
		if i < len(pods) && completionIndex(pods[i]) == completionIndex(pods[start]) {
			continue
		}
		group := pods[start:i]
		switch ix := completionIndex(group[0]); {
		case ix == unknownIndex || ix >= completions:
			rm = append(rm, group...)
		case len(group) == 1:
			left = append(left, group[0])
		default:
			sort.Sort(activePods(group))
			rm = append(rm, group[:len(group)-1]...)
			left = append(left, group[len(group)-1])
		}
		start = i
	}
	return rm, left
}

func sortByIndex(pods []*corev1.Pod) {
	sort.SliceStable(pods, func(i, j int) bool { return completionIndex(pods[i]) < completionIndex(pods[j]) })
}

// delayedDeletions are, per index neither succeeded, failed nor active,
// the last failed pod whose finalizer stays until its replacement is made
// (to carry its failure counts over).
func delayedDeletions(jc *syncCtx) map[int]*corev1.Pod {
	active := indexesOf(jc.active)
	out := map[int]*corev1.Pod{}
	for _, p := range jc.pods {
		if !hasFinalizer(p) || jc.expectedRm.Has(p.UID) || !validIndex(jc.job, p) || !podFailed(p, jc.job) {
			continue
		}
		ix := completionIndex(p)
		if jc.succeededIdx.has(ix) || jc.failedIdx != nil && jc.failedIdx.has(ix) || active.Has(ix) {
			continue
		}
		last, ok := out[ix]
		if !ok || absoluteFailures(last) <= absoluteFailures(p) && !finishedAt(p).Before(finishedAt(last)) {
			out[ix] = p
		}
	}
	return out
}

// newIndexFailureCounts are the counts a replacement of replaced carries.
func newIndexFailureCounts(j *batchv1.Job, replaced *corev1.Pod) (failed, ignored int32) {
	if replaced == nil {
		return 0, 0
	}
	failed = annotationCount(replaced, batchv1.JobIndexFailureCountAnnotation)
	ignored = annotationCount(replaced, batchv1.JobIndexIgnoredFailureCountAnnotation)
	if j.Spec.PodFailurePolicy != nil {
		if _, count, _ := matchPodFailurePolicy(j.Spec.PodFailurePolicy, replaced); !count {
			return failed, ignored + 1
		}
	}
	return failed + 1, ignored
}

func absoluteFailures(p *corev1.Pod) int32 {
	return annotationCount(p, batchv1.JobIndexFailureCountAnnotation) + annotationCount(p, batchv1.JobIndexIgnoredFailureCountAnnotation)
}

// annotationCount reads a count annotation, 0 if absent or invalid.
func annotationCount(p *corev1.Pod, name string) int32 {
	v, err := strconv.Atoi(p.Annotations[name])
	if err != nil || v < 0 || v > math.MaxInt32 {
		return 0
	}
	return int32(v)
}

// indexedGenerateName is "<job>-<index>-", the job name cut to fit.
func indexedGenerateName(job string, ix int) string {
	suffix := indexedPrefix + strconv.Itoa(ix) + "-"
	if len(job)+len(suffix) > maxGenerated {
		job = job[:maxGenerated-len(suffix)]
	}
	return job + suffix
}

// withIndexEnv adds JOB_COMPLETION_INDEX (from the index label) to every
// container that has not got it.
func withIndexEnv(t *corev1.PodTemplateSpec) {
	add := func(cs []corev1.Container) {
		for i := range cs {
			if slices.ContainsFunc(cs[i].Env, func(e corev1.EnvVar) bool { return e.Name == indexEnv }) {
				continue
			}
			cs[i].Env = append(cs[i].Env, corev1.EnvVar{Name: indexEnv, ValueFrom: &corev1.EnvVarSource{
				FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['" + batchv1.JobCompletionIndexAnnotation + "']"}}})
		}
	}
	add(t.Spec.InitContainers)
	add(t.Spec.Containers)
}
