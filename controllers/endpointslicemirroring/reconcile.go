package endpointslicemirroring

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	endpointsliceutil "k8s.io/endpointslice/util"
	"k8s.io/klog/v2"
	utilnet "k8s.io/utils/net"

	"github.com/kubeembed/apiserver/internal/endpoints"
)

// Event reasons, as upstream's.
const (
	invalidIPAddress         = "InvalidIPAddress"
	tooManyAddressesToMirror = "TooManyAddressesToMirror"
)

// portKey groups endpoints by address type and port set:
// "<addressType>-<port map key>".
type portKey string

func newPortKey(ports []discoveryv1.EndpointPort, t discoveryv1.AddressType) portKey {
	return portKey(fmt.Sprintf("%s-%s", t, endpointsliceutil.NewPortMapKey(ports)))
}

// desired are the endpoints and ports wanted per portKey.
type desired struct {
	ports     map[portKey][]discoveryv1.EndpointPort
	endpoints map[portKey]endpointsliceutil.EndpointSet
}

// actions are the slices to create, update and delete.
type actions struct {
	create, update, remove []*discoveryv1.EndpointSlice
}

// reconcile creates, updates and deletes the slices mirrored from ep, as
// upstream's reconciler.
func (c *Controller) reconcile(ctx context.Context, ep *corev1.Endpoints, existing []*discoveryv1.EndpointSlice) error {
	d := c.desired(klog.FromContext(ctx), ep)
	byKey := map[portKey][]*discoveryv1.EndpointSlice{}
	for _, s := range existing {
		k := newPortKey(s.Ports, s.AddressType)
		byKey[k] = append(byKey[k], s)
	}
	var todo actions
	for k, set := range d.endpoints {
		a := c.reconcilePorts(ep, byKey[k], set, d.ports[k], addressType(k))
		todo.create, todo.update, todo.remove = append(todo.create, a.create...), append(todo.update, a.update...), append(todo.remove, a.remove...)
	}
	// Port sets no longer wanted.
	for k, slices := range byKey {
		if _, ok := d.endpoints[k]; !ok {
			todo.remove = append(todo.remove, slices...)
		}
	}
	return c.finalize(ctx, ep, todo)
}

func addressType(k portKey) discoveryv1.AddressType {
	if strings.HasPrefix(string(k), string(discoveryv1.AddressTypeIPv6)) {
		return discoveryv1.AddressTypeIPv6
	}
	return discoveryv1.AddressTypeIPv4
}

// desired maps ep's repacked subsets to endpoints per address type and
// port set: ready addresses first, then not-ready ones, at most
// maxEndpointsPerSubset per subset. Skipped addresses are Warning events
// on ep.
func (c *Controller) desired(logger klog.Logger, ep *corev1.Endpoints) desired {
	d := desired{ports: map[portKey][]discoveryv1.EndpointPort{}, endpoints: map[portKey]endpointsliceutil.EndpointSet{}}
	invalid, skipped := 0, 0
	for _, subset := range endpoints.RepackSubsets(ep.Subsets) {
		ports := slicePorts(subset.Ports)
		keys := map[discoveryv1.AddressType]portKey{}
		for _, t := range []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6} {
			keys[t] = newPortKey(ports, t)
			if d.endpoints[keys[t]] == nil {
				d.endpoints[keys[t]] = endpointsliceutil.EndpointSet{}
			}
			d.ports[keys[t]] = ports
		}
		added := 0
		add := func(addrs []corev1.EndpointAddress, ready bool) {
			for _, addr := range addrs {
				if added >= maxEndpointsPerSubset {
					return
				}
				e, t, ok := toEndpoint(addr, ready)
				if !ok {
					invalid++
					logger.Info("Address in Endpoints is not a valid IP, it will not be mirrored to an EndpointSlice", "endpoints", klog.KObj(ep), "IP", addr.IP)
					continue
				}
				d.endpoints[keys[t]].Insert(e)
				added++
			}
		}
		add(subset.Addresses, true)
		add(subset.NotReadyAddresses, false)
		skipped += len(subset.Addresses) + len(subset.NotReadyAddresses) - added
	}
	if invalid > 0 {
		c.recorder.Eventf(ep, corev1.EventTypeWarning, invalidIPAddress, "Skipped %d invalid IP addresses when mirroring to EndpointSlices", invalid)
	}
	if skipped > invalid {
		c.recorder.Eventf(ep, corev1.EventTypeWarning, tooManyAddressesToMirror,
			"A max of %d addresses can be mirrored to EndpointSlices per Endpoints subset. %d addresses were skipped", maxEndpointsPerSubset, skipped)
	}
	return d
}

// slicePorts are an Endpoints subset's ports as a slice's (the name a
// pointer even when empty).
func slicePorts(ports []corev1.EndpointPort) []discoveryv1.EndpointPort {
	out := []discoveryv1.EndpointPort{}
	for _, p := range ports {
		p := p.DeepCopy()
		out = append(out, discoveryv1.EndpointPort{Name: &p.Name, Port: &p.Port, Protocol: &p.Protocol, AppProtocol: p.AppProtocol})
	}
	return out
}

// toEndpoint is addr as a slice's endpoint and its address type; an
// address that is not an IP is not.
func toEndpoint(addr corev1.EndpointAddress, ready bool) (*discoveryv1.Endpoint, discoveryv1.AddressType, bool) {
	ip := utilnet.ParseIPSloppy(addr.IP)
	if ip == nil {
		return nil, "", false
	}
	t := discoveryv1.AddressTypeIPv4
	if ip.To4() == nil {
		t = discoveryv1.AddressTypeIPv6
	}
	// Re-stringified, in case the Endpoints' is irregular.
	e := &discoveryv1.Endpoint{Addresses: []string{ip.String()}, Conditions: discoveryv1.EndpointConditions{Ready: &ready},
		TargetRef: addr.TargetRef, NodeName: addr.NodeName}
	if addr.Hostname != "" {
		e.Hostname = &addr.Hostname
	}
	return e, t, true
}

// reconcilePorts keeps one slice for a port set and address type: the
// first existing one, rewritten unless its endpoints, labels, annotations
// and owner are already right; the others are deleted.
func (c *Controller) reconcilePorts(ep *corev1.Endpoints, existing []*discoveryv1.EndpointSlice, want endpointsliceutil.EndpointSet,
	ports []discoveryv1.EndpointPort, t discoveryv1.AddressType) actions {
	if want.Len() == 0 {
		return actions{remove: existing}
	}
	var a actions
	name := ""
	if len(existing) > 0 {
		a.remove, name = existing[1:], existing[0].Name
		if upToDate(ep, existing[0], want) {
			if !c.tracker.Has(existing[0]) {
				c.tracker.Update(existing[0]) // every slice is tracked
			}
			return a
		}
	}
	slice := newSlice(ep, ports, t, name)
	for want.Len() > 0 && len(slice.Endpoints) < maxEndpointsPerSubset {
		e, _ := want.PopAny()
		slice.Endpoints = append(slice.Endpoints, *e)
	}
	if name != "" {
		a.update = []*discoveryv1.EndpointSlice{slice}
	} else {
		a.create = []*discoveryv1.EndpointSlice{slice}
	}
	return a
}

// upToDate reports whether slice has exactly the endpoints wanted, ep's
// labels and annotations (but the trigger time and kubectl's last applied
// configuration), and is not owned by an older Endpoints of the name.
func upToDate(ep *corev1.Endpoints, slice *discoveryv1.EndpointSlice, want endpointsliceutil.EndpointSet) bool {
	matched := 0
	for i := range slice.Endpoints {
		got := want.Get(&slice.Endpoints[i])
		if got == nil || !endpointsliceutil.EndpointsEqualBeyondHash(got, &slice.Endpoints[i]) {
			return false
		}
		matched++
	}
	if matched != want.Len() {
		return false
	}
	annotations := withoutKeys(ep.Annotations, corev1.EndpointsLastChangeTriggerTime, corev1.LastAppliedConfigAnnotation)
	sliceLabels := withoutKeys(slice.Labels, discoveryv1.LabelManagedBy, discoveryv1.LabelServiceName)
	return apiequality.Semantic.DeepEqual(ep.Labels, sliceLabels) && apiequality.Semantic.DeepEqual(annotations, slice.Annotations) &&
		!slices.ContainsFunc(slice.OwnerReferences, func(o metav1.OwnerReference) bool {
			return o.Kind == "Endpoints" && o.Name == ep.Name && o.UID != ep.UID
		})
}

func withoutKeys(m map[string]string, keys ...string) map[string]string {
	out := maps.Clone(m)
	if out == nil {
		out = map[string]string{}
	}
	for _, k := range keys {
		delete(out, k)
	}
	return out
}

// newSlice is the slice mirroring ep's ports of address type t, named
// name (or generated from ep's when empty), with no endpoints yet.
func newSlice(ep *corev1.Endpoints, ports []discoveryv1.EndpointPort, t discoveryv1.AddressType, name string) *discoveryv1.EndpointSlice {
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ep.Namespace,
			Labels:          maps.Clone(ep.Labels),
			Annotations:     withoutKeys(ep.Annotations, corev1.EndpointsLastChangeTriggerTime, corev1.LastAppliedConfigAnnotation),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ep, corev1.SchemeGroupVersion.WithKind("Endpoints"))},
		},
		Ports: ports, AddressType: t, Endpoints: []discoveryv1.Endpoint{},
	}
	if slice.Labels == nil {
		slice.Labels = map[string]string{}
	}
	slice.Labels[discoveryv1.LabelServiceName] = ep.Name
	slice.Labels[discoveryv1.LabelManagedBy] = ControllerName
	if name == "" {
		slice.GenerateName = ep.Name + "-"
		if len(apimachineryvalidation.NameIsDNSSubdomain(slice.GenerateName, true)) != 0 {
			slice.GenerateName = ep.Name
		}
	}
	return slice
}

// finalize writes todo, turning a create and a delete of the same address
// type into an update of the slice that would be deleted. Nothing is
// created for Endpoints being deleted.
func (c *Controller) finalize(ctx context.Context, ep *corev1.Endpoints, todo actions) error {
	recycle(&todo)
	api := c.client.DiscoveryV1().EndpointSlices(ep.Namespace)
	if ep.DeletionTimestamp == nil {
		for _, s := range todo.create {
			created, err := api.Create(ctx, s, metav1.CreateOptions{})
			if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
				return nil // creates fail until the namespace is gone
			}
			if err != nil {
				return fmt.Errorf("failed to create EndpointSlice for Endpoints %s/%s: %v", ep.Namespace, ep.Name, err)
			}
			c.tracker.Update(created)
		}
	}
	for _, s := range todo.update {
		updated, err := api.Update(ctx, s, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("failed to update %s EndpointSlice for Endpoints %s/%s: %v", s.Name, ep.Namespace, ep.Name, err)
		}
		c.tracker.Update(updated)
	}
	for _, s := range todo.remove {
		if err := api.Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil {
			return fmt.Errorf("failed to delete %s EndpointSlice for Endpoints %s/%s: %v", s.Name, ep.Namespace, ep.Name, err)
		}
		c.tracker.ExpectDeletion(s)
	}
	return nil
}

// recycle replaces creates by updates of slices of the same address type
// that would be deleted, pairing them in order. (Upstream removes the paired
// create by name, which is empty for every create: with creates of both
// families, it can drop the other family's. Here the pair's own is
// removed.) The generateName stays, as upstream's: it is the one the
// recycled slice was created with.
func recycle(todo *actions) {
	for _, t := range []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6} {
		for {
			ci := slices.IndexFunc(todo.create, func(s *discoveryv1.EndpointSlice) bool { return s.AddressType == t })
			ri := slices.IndexFunc(todo.remove, func(s *discoveryv1.EndpointSlice) bool { return s.AddressType == t })
			if ci < 0 || ri < 0 {
				break
			}
			s := todo.create[ci]
			s.Name = todo.remove[ri].Name
			todo.create = slices.Delete(todo.create, ci, ci+1)
			todo.remove = slices.Delete(todo.remove, ri, ri+1)
			todo.update = append(todo.update, s)
		}
	}
}
