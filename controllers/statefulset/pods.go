package statefulset

// A StatefulSet's pods: their identity (name, labels, hostname), storage
// (claims from the volumeClaimTemplates) and the writes that make them, with
// upstream's events.

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	"github.com/kubeembed/apiserver/internal/controller"
)

var podNameRE = regexp.MustCompile("(.*)-([0-9]+)$")

// parentAndOrdinal splits a pod name <parent>-<ordinal>; -1 if it is not one.
func parentAndOrdinal(name string) (string, int) {
	m := podNameRE.FindStringSubmatch(name)
	if len(m) < 3 {
		return "", -1
	}
	i, err := strconv.ParseInt(m[2], 10, 32)
	if err != nil {
		return m[1], -1
	}
	return m[1], int(i)
}

func ordinalOf(p *corev1.Pod) int { _, o := parentAndOrdinal(p.Name); return o }

func startOrdinal(set *appsv1.StatefulSet) int {
	if set.Spec.Ordinals != nil {
		return int(set.Spec.Ordinals.Start)
	}
	return 0
}

func endOrdinal(set *appsv1.StatefulSet) int { return startOrdinal(set) + int(*set.Spec.Replicas) - 1 }

func inRange(p *corev1.Pod, set *appsv1.StatefulSet) bool {
	o := ordinalOf(p)
	return o >= startOrdinal(set) && o <= endOrdinal(set)
}

func podName(set *appsv1.StatefulSet, ordinal int) string {
	return fmt.Sprintf("%s-%d", set.Name, ordinal)
}

func claimName(set *appsv1.StatefulSet, template string, ordinal int) string {
	return fmt.Sprintf("%s-%s-%d", template, set.Name, ordinal)
}

func identityMatches(set *appsv1.StatefulSet, p *corev1.Pod) bool {
	parent, o := parentAndOrdinal(p.Name)
	return o >= 0 && parent == set.Name && p.Name == podName(set, o) && p.Namespace == set.Namespace &&
		p.Labels[appsv1.StatefulSetPodNameLabel] == p.Name
}

func storageMatches(set *appsv1.StatefulSet, p *corev1.Pod) bool {
	o := ordinalOf(p)
	if o < 0 {
		return false
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range p.Spec.Volumes {
		volumes[v.Name] = v
	}
	for _, t := range set.Spec.VolumeClaimTemplates {
		v, ok := volumes[t.Name]
		if !ok || v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != claimName(set, t.Name, o) {
			return false
		}
	}
	return true
}

// claimsOf are the claims p's ordinal needs, in template order: the
// template named per ordinal, labelled with the selector's matchLabels.
func claimsOf(set *appsv1.StatefulSet, p *corev1.Pod) []*corev1.PersistentVolumeClaim {
	o := ordinalOf(p)
	var out []*corev1.PersistentVolumeClaim
	for i := range set.Spec.VolumeClaimTemplates {
		claim := set.Spec.VolumeClaimTemplates[i].DeepCopy()
		claim.Name = claimName(set, set.Spec.VolumeClaimTemplates[i].Name, o)
		claim.Namespace = set.Namespace
		if claim.Labels == nil {
			claim.Labels = map[string]string{}
		}
		for k, v := range set.Spec.Selector.MatchLabels {
			claim.Labels[k] = v
		}
		if len(claim.Labels) == 0 {
			claim.Labels = nil
		}
		out = append(out, claim)
	}
	return out
}

// updateStorage points p's volumes of the templates' names at its claims.
func updateStorage(set *appsv1.StatefulSet, p *corev1.Pod) {
	o := ordinalOf(p)
	names := map[string]bool{}
	var volumes []corev1.Volume
	for _, t := range set.Spec.VolumeClaimTemplates {
		names[t.Name] = true
		volumes = append(volumes, corev1.Volume{Name: t.Name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claimName(set, t.Name, o)}}})
	}
	for _, v := range p.Spec.Volumes {
		if !names[v.Name] {
			volumes = append(volumes, v)
		}
	}
	p.Spec.Volumes = volumes
}

func updateIdentity(set *appsv1.StatefulSet, p *corev1.Pod) {
	o := ordinalOf(p)
	p.Name, p.Namespace = podName(set, o), set.Namespace
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	p.Labels[appsv1.StatefulSetPodNameLabel] = p.Name
	p.Labels[appsv1.PodIndexLabel] = strconv.Itoa(o)
}

// newPod is the pod of set's template at ordinal, of revision.
func newPod(set *appsv1.StatefulSet, ordinal int, revision string) *corev1.Pod {
	t := &set.Spec.Template
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: podName(set, ordinal), GenerateName: set.Name + "-",
		Labels: copyMap(t.Labels), Annotations: copyMap(t.Annotations), Finalizers: append([]string(nil), t.Finalizers...),
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(set, setKind)}}, Spec: *t.Spec.DeepCopy()}
	updateIdentity(set, p)
	p.Spec.Hostname, p.Spec.Subdomain = p.Name, set.Spec.ServiceName
	updateStorage(set, p)
	p.Labels[appsv1.StatefulSetRevisionLabel] = revision
	return p
}

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// versionedPod is the pod at ordinal: of the current revision below the
// partition (or, without a rollingUpdate, below the current replicas),
// else of the update revision.
func versionedPod(current, update *appsv1.StatefulSet, currentRev, updateRev string, ordinal int) *corev1.Pod {
	s := current.Spec.UpdateStrategy
	if s.Type == appsv1.RollingUpdateStatefulSetStrategyType && s.RollingUpdate == nil && ordinal < startOrdinal(current)+int(current.Status.CurrentReplicas) ||
		s.RollingUpdate != nil && ordinal < startOrdinal(current)+int(*s.RollingUpdate.Partition) {
		return newPod(current, ordinal, currentRev)
	}
	return newPod(update, ordinal, updateRev)
}

func podRevision(p *corev1.Pod) string { return p.Labels[appsv1.StatefulSetRevisionLabel] }

func isCreated(p *corev1.Pod) bool     { return p.Status.Phase != "" }
func isPending(p *corev1.Pod) bool     { return p.Status.Phase == corev1.PodPending }
func isTerminating(p *corev1.Pod) bool { return p.DeletionTimestamp != nil }
func isRunningAndReady(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodRunning && controller.PodReady(p)
}
func isTerminalPhase(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded
}

func isUnavailable(p *corev1.Pod, minReady int32, now time.Time) bool {
	return !controller.PodAvailable(p, minReady, now) || isTerminating(p)
}

// podEvent records upstream's event of a pod write ("Create Pod web-0 in
// StatefulSet web successful": v1.37 title-cases the verb).
func (c *Controller) podEvent(verb string, set *appsv1.StatefulSet, p *corev1.Pod, err error) {
	title := map[string]string{"create": "Create", "update": "Update", "delete": "Delete"}[verb]
	if err == nil {
		c.recorder().Event(set, corev1.EventTypeNormal, "Successful"+title, fmt.Sprintf("%s Pod %s in StatefulSet %s successful", title, p.Name, set.Name))
		return
	}
	c.recorder().Event(set, corev1.EventTypeWarning, "Failed"+title, fmt.Sprintf("%s Pod %s in StatefulSet %s failed error: %s", title, p.Name, set.Name, err))
}

func (c *Controller) claimEvent(set *appsv1.StatefulSet, p *corev1.Pod, claim *corev1.PersistentVolumeClaim, err error) {
	if err == nil {
		c.recorder().Event(set, corev1.EventTypeNormal, "SuccessfulCreate", fmt.Sprintf("Create Claim %s Pod %s in StatefulSet %s success", claim.Name, p.Name, set.Name))
		return
	}
	c.recorder().Event(set, corev1.EventTypeWarning, "FailedCreate", fmt.Sprintf("Create Claim %s for Pod %s in StatefulSet %s failed error: %s", claim.Name, p.Name, set.Name, err))
}

// createPod creates p's claims, then p, then sets the claims' owners for
// the retention policy.
func (c *Controller) createPod(ctx context.Context, set *appsv1.StatefulSet, p *corev1.Pod) error {
	if err := c.createClaims(ctx, set, p); err != nil {
		c.podEvent("create", set, p, err)
		return err
	}
	created, err := c.client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return err
	}
	if err == nil {
		c.written.wrote(key(set), set.UID, "pods", created.ResourceVersion)
	}
	if err := c.updateClaimsForPolicy(ctx, set, p); err != nil {
		c.podEvent("update", set, p, err)
		return err
	}
	c.podEvent("create", set, p, err)
	return err
}

// createClaims creates p's missing claims; a claim being deleted is an
// error (the pod waits for it to go).
func (c *Controller) createClaims(ctx context.Context, set *appsv1.StatefulSet, p *corev1.Pod) error {
	var errs []error
	for _, claim := range claimsOf(set, p) {
		existing, err := c.claims.PersistentVolumeClaims(claim.Namespace).Get(claim.Name)
		switch {
		case apierrors.IsNotFound(err):
			created, err := c.client.CoreV1().PersistentVolumeClaims(claim.Namespace).Create(ctx, claim, metav1.CreateOptions{})
			if err != nil {
				errs = append(errs, fmt.Errorf("failed to create PVC %s: %w", claim.Name, err))
			} else {
				c.written.wrote(key(set), set.UID, "persistentvolumeclaims", created.ResourceVersion)
			}
			if err == nil || !apierrors.IsAlreadyExists(err) {
				c.claimEvent(set, p, claim, err)
			}
		case err != nil:
			errs = append(errs, fmt.Errorf("failed to retrieve PVC %s: %w", claim.Name, err))
			c.claimEvent(set, p, claim, err)
		case existing.DeletionTimestamp != nil:
			errs = append(errs, fmt.Errorf("pvc %s is being deleted", claim.Name))
		}
	}
	return joinErrs(errs)
}

// deletePod deletes p; a pod already gone is no error. The same request
// as the typed client's, read for the pod it returns when the deletion is
// graceful: its resourceVersion is noted as a write (upstream notes none),
// so that the next sync waits until the informer shows p terminating
// instead of deleting it again: kube-controller-manager's round trips
// make that race rare, an in-process server's make it common.
func (c *Controller) deletePod(ctx context.Context, set *appsv1.StatefulSet, p *corev1.Pod) error {
	var err error
	if rc, ok := c.client.CoreV1().RESTClient().(*rest.RESTClient); ok && rc != nil {
		var obj runtime.Object
		obj, err = rc.Delete().Namespace(p.Namespace).Resource("pods").Name(p.Name).Body(&metav1.DeleteOptions{}).Do(ctx).Get()
		if deleted, ok := obj.(*corev1.Pod); ok && err == nil {
			c.written.wrote(key(set), set.UID, "pods", deleted.ResourceVersion)
		}
	} else {
		err = c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{})
	}
	if err != nil && !apierrors.IsNotFound(err) {
		c.podEvent("delete", set, p, err)
		return err
	}
	c.podEvent("delete", set, p, nil)
	return nil
}

// updatePod restores p's identity, storage and claims' owners, retried on
// conflict with the cached pod (upstream's UpdateStatefulPod).
func (c *Controller) updatePod(ctx context.Context, set *appsv1.StatefulSet, p *corev1.Pod) error {
	attempted := false
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		consistent := true
		if !identityMatches(set, p) {
			updateIdentity(set, p)
			consistent = false
		}
		if !storageMatches(set, p) {
			updateStorage(set, p)
			consistent = false
			if err := c.createClaims(ctx, set, p); err != nil {
				c.podEvent("update", set, p, err)
				return err
			}
		}
		if match, err := c.claimsMatchPolicy(set, p); err != nil {
			c.podEvent("update", set, p, err)
			return err
		} else if !match {
			if err := c.updateClaimsForPolicy(ctx, set, p); err != nil {
				c.podEvent("update", set, p, err)
				return err
			}
			consistent = false
		}
		if consistent {
			return nil
		}
		attempted = true
		updated, err := c.client.CoreV1().Pods(p.Namespace).Update(ctx, p, metav1.UpdateOptions{})
		if err == nil {
			c.written.wrote(key(set), set.UID, "pods", updated.ResourceVersion)
			return nil
		}
		if cached, getErr := c.podList.Pods(set.Namespace).Get(p.Name); getErr == nil {
			p = cached.DeepCopy()
		}
		return err
	})
	if attempted {
		c.podEvent("update", set, p, err)
	}
	return err
}
