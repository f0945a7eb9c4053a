package endpoint

import (
	"context"
	"fmt"
	"maps"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/endpointslice"
	endpointsliceutil "k8s.io/endpointslice/util"
	"k8s.io/klog/v2"
	utilnet "k8s.io/utils/net"

	"github.com/kubeembed/apiserver/internal/endpoints"
)

// work syncs the Service of key and retries a failure as upstream's
// handleErr does: with the queue's backoff, at most maxRetries times.
func (c *Controller) work(ctx context.Context, key string) error {
	err := c.syncService(ctx, key)
	if err != nil && c.queue.NumRequeues(key) >= maxRetries {
		klog.FromContext(ctx).Info("Dropping service out of the queue", "key", key, "err", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("sync service %s: %w", key, err)
	}
	return nil
}

// syncService writes the Endpoints of the Service of key, or deletes them
// when the Service is gone, as upstream's syncService.
func (c *Controller) syncService(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	svc, err := c.services.Services(ns).Get(name)
	switch {
	case apierrors.IsNotFound(err):
		// Not owned by the Service: nothing else deletes them.
		err := c.client.CoreV1().Endpoints(ns).Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		c.triggers.DeleteService(ns, name)
		c.stale.forget(ns, name)
		return nil
	case err != nil:
		return err
	case svc.Spec.Type == corev1.ServiceTypeExternalName, svc.Spec.Selector == nil:
		// No endpoints for these (issue 105986); a selectorless Service's
		// Endpoints are its owner's.
		return nil
	}
	pods, err := c.pods.Pods(ns).List(labels.Set(svc.Spec.Selector).AsSelectorPreValidated())
	if err != nil {
		return err
	}
	// Computed on every sync, so that the tracker follows the pods even when
	// nothing is written.
	trigger := c.triggers.ComputeEndpointLastChangeTriggerTime(ns, svc, pods)
	subsets := endpoints.RepackSubsets(desiredSubsets(klog.FromContext(ctx), svc, pods))
	current, err := c.endpoints.Endpoints(ns).Get(name)
	switch {
	case apierrors.IsNotFound(err):
		current = &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: svc.Labels}}
	case err != nil:
		return err
	case c.stale.is(current):
		return fmt.Errorf("endpoints informer cache is out of date, resource version %s already processed for endpoints %s", current.ResourceVersion, key)
	}
	create := current.ResourceVersion == ""
	if !create && upToDate(current, svc, subsets) {
		return nil
	}
	return c.write(ctx, svc, current, newEndpoints(current, svc, subsets, trigger), create)
}

// desiredSubsets are a subset per pod and port (unpacked) of the pods svc
// selects that have an IP of its family: ready ones (or all, if it
// publishes not-ready addresses) as addresses, the others as
// notReadyAddresses.
func desiredSubsets(logger klog.Logger, svc *corev1.Service, pods []*corev1.Pod) []corev1.EndpointSubset {
	subsets := []corev1.EndpointSubset{}
	publishNotReady := svc.Spec.PublishNotReadyAddresses
	for _, pod := range pods {
		if !endpointsliceutil.ShouldPodBeInEndpoints(pod, publishNotReady) {
			continue
		}
		addr, ok := podAddress(svc, pod)
		if !ok {
			continue // no IP of the Service's family (a node not dual-stack yet)
		}
		ready := publishNotReady || endpointsliceutil.IsPodReady(pod)
		if len(svc.Spec.Ports) == 0 {
			// A headless Service may have no ports.
			if svc.Spec.ClusterIP == corev1.ClusterIPNone {
				subsets = append(subsets, subset(addr, nil, ready))
			}
			continue
		}
		for i := range svc.Spec.Ports {
			sp := &svc.Spec.Ports[i]
			port, err := endpointslice.FindPort(pod, sp)
			if err != nil {
				logger.V(4).Info("Failed to find port for service", "service", klog.KObj(svc), "error", err)
				continue
			}
			subsets = append(subsets, subset(addr, &corev1.EndpointPort{Name: sp.Name, Port: int32(port),
				Protocol: sp.Protocol, AppProtocol: sp.AppProtocol}, ready))
		}
	}
	return subsets
}

func subset(addr corev1.EndpointAddress, port *corev1.EndpointPort, ready bool) corev1.EndpointSubset {
	s := corev1.EndpointSubset{Ports: []corev1.EndpointPort{}}
	if port != nil {
		s.Ports = append(s.Ports, *port)
	}
	if ready {
		s.Addresses = []corev1.EndpointAddress{addr}
	} else {
		s.NotReadyAddresses = []corev1.EndpointAddress{addr}
	}
	return s
}

// podAddress is pod's address for svc: its first IP of the Service's
// (primary) family.
func podAddress(svc *corev1.Service, pod *corev1.Pod) (corev1.EndpointAddress, bool) {
	// IPFamilies is defaulted by the server, but a watch may bring a
	// Service without; then the ClusterIP, else the pod's IP, tells.
	family := corev1.IPv4Protocol
	switch {
	case len(svc.Spec.IPFamilies) > 0:
		family = svc.Spec.IPFamilies[0]
	case svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != corev1.ClusterIPNone:
		if utilnet.IsIPv6String(svc.Spec.ClusterIP) {
			family = corev1.IPv6Protocol
		}
	case utilnet.IsIPv6String(pod.Status.PodIP):
		family = corev1.IPv6Protocol
	}
	for _, podIP := range pod.Status.PodIPs {
		// Re-stringified, in case the pod's is irregular.
		if ip := utilnet.ParseIPSloppy(podIP.IP); (family == corev1.IPv6Protocol) == utilnet.IsIPv6(ip) {
			addr := corev1.EndpointAddress{IP: ip.String(), NodeName: &pod.Spec.NodeName,
				TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}}
			if endpointsliceutil.ShouldSetHostname(pod, svc) {
				addr.Hostname = pod.Spec.Hostname
			}
			return addr, true
		}
	}
	return corev1.EndpointAddress{}, false
}

// ignoreResourceVersion compares subsets without their targets'
// resourceVersion: a pod's unrelated change must not rewrite its Endpoints.
var ignoreResourceVersion = conversion.EqualitiesOrDie(func(a, b corev1.ObjectReference) bool {
	a.ResourceVersion, b.ResourceVersion = "", ""
	return a == b
})

// upToDate reports whether current need not be written: same subsets (as
// they are, or repacked: the hash order may differ across versions, issue
// 129652), the labels the Service gives, and the over-capacity annotation
// only when over capacity. A new trigger time alone writes nothing.
func upToDate(current *corev1.Endpoints, svc *corev1.Service, subsets []corev1.EndpointSubset) bool {
	sameSubsets := ignoreResourceVersion.DeepEqual(current.Subsets, subsets) ||
		ignoreResourceVersion.DeepEqual(endpoints.RepackSubsets(current.Subsets), subsets)
	return sameSubsets && labelsCorrect(current.Labels, svc.Labels) && capacityAnnotationCorrect(current)
}

// labelsCorrect reports whether an Endpoints' labels are the Service's
// plus the managed-by label (and the headless one, whatever its value).
func labelsCorrect(epLabels, svcLabels map[string]string) bool {
	if epLabels[LabelManagedBy] != ControllerName {
		return false
	}
	skipped := 0
	for k, v := range epLabels {
		if k == corev1.IsHeadlessService || k == LabelManagedBy {
			skipped++
		} else if sv, ok := svcLabels[k]; !ok || sv != v {
			return false
		}
	}
	return len(svcLabels) == len(epLabels)-skipped
}

// capacityAnnotationCorrect is false when the subsets are over capacity
// (they must be truncated) or the annotation says so while they are not.
func capacityAnnotationCorrect(ep *corev1.Endpoints) bool {
	n := 0
	for _, s := range ep.Subsets {
		n += len(s.Addresses) + len(s.NotReadyAddresses)
	}
	_, annotated := ep.Annotations[corev1.EndpointsOverCapacity]
	return n <= maxCapacity && !annotated
}

// newEndpoints is current with subsets, svc's labels (plus headless and
// managed-by) and the trigger time and over-capacity annotations.
func newEndpoints(current *corev1.Endpoints, svc *corev1.Service, subsets []corev1.EndpointSubset, trigger time.Time) *corev1.Endpoints {
	ep := current.DeepCopy()
	ep.Subsets = subsets
	if ep.Annotations == nil {
		ep.Annotations = map[string]string{}
	}
	if trigger.IsZero() {
		delete(ep.Annotations, corev1.EndpointsLastChangeTriggerTime)
	} else {
		ep.Annotations[corev1.EndpointsLastChangeTriggerTime] = trigger.UTC().Format(time.RFC3339Nano)
	}
	if truncate(ep) {
		ep.Annotations[corev1.EndpointsOverCapacity] = truncated
	} else {
		delete(ep.Annotations, corev1.EndpointsOverCapacity)
	}
	ep.Labels = maps.Clone(svc.Labels)
	if ep.Labels == nil {
		ep.Labels = map[string]string{}
	}
	if svc.Spec.ClusterIP == corev1.ClusterIPNone || svc.Spec.ClusterIP == "" {
		ep.Labels[corev1.IsHeadlessService] = ""
	} else {
		delete(ep.Labels, corev1.IsHeadlessService)
	}
	ep.Labels[LabelManagedBy] = ControllerName
	return ep
}

// truncate keeps at most maxCapacity addresses, ready ones first, each
// subset keeping its share (rounded up, the last one what is left); it
// reports whether it had to.
func truncate(ep *corev1.Endpoints) bool {
	ready, notReady := 0, 0
	for _, s := range ep.Subsets {
		ready += len(s.Addresses)
		notReady += len(s.NotReadyAddresses)
	}
	if ready+notReady <= maxCapacity {
		return false
	}
	truncateReady, limit, total := ready > maxCapacity, maxCapacity-ready, notReady
	if truncateReady {
		limit, total = maxCapacity, ready
	}
	left := limit
	for i := range ep.Subsets {
		s := &ep.Subsets[i]
		n := len(s.NotReadyAddresses)
		if truncateReady {
			n = len(s.Addresses)
		}
		keep := min(int(math.Ceil(float64(n)/float64(total)*float64(limit))), left)
		if truncateReady {
			s.Addresses = s.Addresses[:min(keep, len(s.Addresses))]
			s.NotReadyAddresses = []corev1.EndpointAddress{}
			left -= len(s.Addresses)
		} else {
			s.NotReadyAddresses = s.NotReadyAddresses[:min(keep, len(s.NotReadyAddresses))]
			left -= len(s.NotReadyAddresses)
		}
	}
	return true
}

// write creates or updates ep; a failure is a Warning event on it.
func (c *Controller) write(ctx context.Context, svc *corev1.Service, current, ep *corev1.Endpoints, create bool) error {
	var err error
	if create {
		_, err = c.client.CoreV1().Endpoints(svc.Namespace).Create(ctx, ep, metav1.CreateOptions{})
		if apierrors.IsForbidden(err) && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			return nil // creates fail until the namespace is gone
		}
		if err != nil {
			c.recorder.Eventf(ep, corev1.EventTypeWarning, "FailedToCreateEndpoint", "Failed to create endpoint for service %v/%v: %v", svc.Namespace, svc.Name, err)
		}
		return err
	}
	updated, err := c.client.CoreV1().Endpoints(svc.Namespace).Update(ctx, ep, metav1.UpdateOptions{})
	if err != nil {
		c.recorder.Eventf(ep, corev1.EventTypeWarning, "FailedToUpdateEndpoint", "Failed to update endpoint %v/%v: %v", svc.Namespace, svc.Name, err)
		return err
	}
	if updated.ResourceVersion != current.ResourceVersion {
		c.stale.mark(current)
	}
	return nil
}
