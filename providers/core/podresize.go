package core

// pods/resize, as kube-apiserver v1.37's resize strategy: a resize writes
// the containers' (init containers' too) resources and resize policies and
// the pod-level resources, nothing else, and is refused where a pod cannot
// be resized that way.

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubeembed/apiserver/internal/podqos"
	"github.com/kubeembed/apiserver/providers/internal/podspec"
	"github.com/kubeembed/apiserver/providers/registry"
)

// resizeResources makes st write what a resize may change.
func resizeResources(st *registry.Strategy) {
	st.PrepareUpdate = func(_ context.Context, obj, old runtime.Object) {
		p, o := obj.(*corev1.Pod), old.(*corev1.Pod)
		keepResizeOnly(p, o)
		if p.Spec.Resources == nil && o.Spec.Resources != nil {
			// A client that does not know pod-level resources keeps them.
			p.Spec.Resources = o.Spec.Resources.DeepCopy()
		}
		podspec.DefaultPodLevelResources(p)
		p.Status = o.Status
		p.Generation = o.Generation
		if !apiequality.Semantic.DeepEqual(p.Spec, o.Spec) {
			p.Generation++
		}
	}
	st.ValidateOnUpdate = func(_ context.Context, obj, old runtime.Object) field.ErrorList {
		p, o := obj.(*corev1.Pod), old.(*corev1.Pod)
		if errs := unresizable(o); errs != nil {
			return errs
		}
		return validateResize(p, o, podspec.ValidateSpec(&p.Spec, field.NewPath("spec")))
	}
}

// keepResizeOnly sets p's spec to o's with p's containers' resources and
// resize policies and p's pod-level resources. Containers added, removed,
// renamed or reordered leave p's spec as it is, for validation to refuse.
func keepResizeOnly(p, o *corev1.Pod) {
	if !sameContainers(p.Spec.Containers, o.Spec.Containers) || !sameContainers(p.Spec.InitContainers, o.Spec.InitContainers) {
		return
	}
	spec := *o.Spec.DeepCopy()
	for i, c := range p.Spec.Containers {
		spec.Containers[i].Resources, spec.Containers[i].ResizePolicy = c.Resources, c.ResizePolicy
	}
	for i, c := range p.Spec.InitContainers {
		spec.InitContainers[i].Resources, spec.InitContainers[i].ResizePolicy = c.Resources, c.ResizePolicy
	}
	spec.Resources = p.Spec.Resources
	p.Spec = spec
	// Nor labels, annotations, finalizers or owners.
	metav1.ResetObjectMetaForStatus(&p.ObjectMeta, &o.ObjectMeta)
}

func sameContainers(a, b []corev1.Container) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name {
			return false
		}
	}
	return true
}

// unresizable refuses the pods no resize may change: static and Windows
// pods.
func unresizable(o *corev1.Pod) field.ErrorList {
	if _, ok := o.Annotations[corev1.MirrorPodAnnotationKey]; ok {
		return field.ErrorList{field.Forbidden(field.NewPath(""), "static pods cannot be resized")}
	}
	if o.Spec.OS != nil && o.Spec.OS.Name == corev1.Windows {
		return field.ErrorList{field.Forbidden(field.NewPath(""), "windows pods cannot be resized")}
	}
	return nil
}

// validateResize checks what the resize changes, after errs (the spec's
// own), in kube-apiserver's order: the QoS class, the node's support, the
// pod-level resources, the containers' order, removed requests or limits,
// and, when nothing else is wrong, that only cpu and memory change.
func validateResize(p, o *corev1.Pod, errs field.ErrorList) field.ErrorList {
	spec := field.NewPath("spec")
	oldClass := o.Status.QOSClass
	if oldClass == "" {
		oldClass = podqos.Class(o)
	}
	if podqos.Class(p) != oldClass {
		errs = append(errs, field.Invalid(spec, p.Status.QOSClass, "Pod QOS Class may not change as a result of resizing"))
	}
	if !resizeSupported(o) {
		errs = append(errs, field.Forbidden(spec, "Pod running on node without support for resize"))
	}
	if podLevelSet(o) || podLevelSet(p) {
		errs = append(errs, validatePodLevelResize(p, o, spec)...)
	}
	if order := containerOrder(p, o, spec); order != nil {
		return append(errs, order...)
	}
	errs = append(errs, containersResize(p, o, spec)...)
	if !apiequality.Semantic.DeepEqual(p.Spec.Volumes, o.Spec.Volumes) {
		errs = append(errs, field.Forbidden(spec.Child("volumes"), "volumes are immutable on resize when InPlacePodVerticalScalingMemoryBackedVolumes feature gate is disabled"))
	}
	if len(errs) == 0 && !onlyCPUMemoryChanged(p, o) {
		errs = append(errs, field.Forbidden(spec, "only cpu and memory resources are mutable"))
	}
	return errs
}

// resizeSupported: the kubelet reports the resources of the pod's first
// running container (a kubelet that cannot resize does not), or nothing
// runs yet.
func resizeSupported(o *corev1.Pod) bool {
	for _, c := range o.Status.ContainerStatuses {
		if c.State.Running != nil {
			return c.Resources != nil
		}
	}
	return true
}

func podLevelSet(p *corev1.Pod) bool {
	r := p.Spec.Resources
	return r != nil && len(r.Requests)+len(r.Limits) > 0
}

// validatePodLevelResize: pod-level resources, their requests and limits
// are not removed, and only their cpu and memory change.
func validatePodLevelResize(p, o *corev1.Pod, spec *field.Path) field.ErrorList {
	path := spec.Child("resources")
	if o.Spec.Resources != nil && p.Spec.Resources == nil {
		return field.ErrorList{field.Forbidden(path, "pod-level resources cannot be removed")}
	}
	var errs field.ErrorList
	if o.Spec.Resources != nil {
		if removed(p.Spec.Resources.Requests, o.Spec.Resources.Requests) {
			errs = append(errs, field.Forbidden(path.Child("requests"), "pod-level resource requests cannot be removed"))
		}
		if removed(p.Spec.Resources.Limits, o.Spec.Resources.Limits) {
			errs = append(errs, field.Forbidden(path.Child("limits"), "pod-level resource limits cannot be removed"))
		}
	}
	if !apiequality.Semantic.DeepEqual(withOldCPUMemory(p.Spec.Resources, o.Spec.Resources), o.Spec.Resources) {
		errs = append(errs, field.Forbidden(spec, "only cpu and memory resources are mutable at pod-level"))
	}
	return errs
}

// containerOrder refuses containers added, removed, renamed or reordered.
func containerOrder(p, o *corev1.Pod, spec *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, kind := range []struct {
		name     string
		cur, old []corev1.Container
	}{{"containers", p.Spec.Containers, o.Spec.Containers}, {"initContainers", p.Spec.InitContainers, o.Spec.InitContainers}} {
		if len(kind.cur) != len(kind.old) {
			errs = append(errs, field.Forbidden(spec.Child(kind.name), kind.name+" may not be added or removed on resize"))
			continue
		}
		for i := range kind.old {
			if kind.cur[i].Name != kind.old[i].Name {
				errs = append(errs, field.Forbidden(spec.Child(kind.name).Index(i).Child("name"), kind.name+" may not be renamed or reordered on resize"))
			}
		}
	}
	return errs
}

// containersResize: no container's requests or limits are removed, and
// only their cpu and memory change (a resize policy does not); a
// non-sidecar init container whose resize policy restarts it is not
// resized.
func containersResize(p, o *corev1.Pod, spec *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, old := range o.Spec.InitContainers {
		errs = append(errs, requirementsKept(p.Spec.InitContainers[i].Resources, old.Resources, spec.Child("initContainers").Index(i).Child("resources"))...)
	}
	for i, old := range o.Spec.Containers {
		errs = append(errs, requirementsKept(p.Spec.Containers[i].Resources, old.Resources, spec.Child("containers").Index(i).Child("resources"))...)
	}
	for i, c := range p.Spec.Containers {
		if !apiequality.Semantic.DeepEqual(containerWithOldCPUMemory(c, o.Spec.Containers[i]), o.Spec.Containers[i]) {
			errs = append(errs, field.Forbidden(spec, "only cpu and memory resources are mutable"))
		}
	}
	for i, c := range p.Spec.InitContainers {
		old, path := o.Spec.InitContainers[i], spec.Child("initContainers").Index(i)
		if !apiequality.Semantic.DeepEqual(containerWithOldCPUMemory(c, old), old) {
			errs = append(errs, field.Forbidden(path, "only cpu and memory resources for init or sidecar containers are mutable"))
		}
		sidecar := c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
		if sidecar || apiequality.Semantic.DeepEqual(c, old) {
			continue
		}
		for _, policy := range c.ResizePolicy {
			if policy.RestartPolicy == corev1.RestartContainer {
				errs = append(errs, field.Forbidden(path, "non-sidecar init containers with a resize policy of RestartContainer cannot be resized"))
			}
		}
	}
	return errs
}

// requirementsKept: a resize removes no request or limit.
func requirementsKept(cur, old corev1.ResourceRequirements, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if removed(cur.Requests, old.Requests) {
		errs = append(errs, field.Forbidden(path.Child("requests"), "resource requests cannot be removed"))
	}
	if removed(cur.Limits, old.Limits) {
		errs = append(errs, field.Forbidden(path.Child("limits"), "resource limits cannot be removed"))
	}
	return errs
}

// removed: a resource of old is not in cur.
func removed(cur, old corev1.ResourceList) bool {
	for name := range old {
		if _, ok := cur[name]; !ok {
			return true
		}
	}
	return false
}

// onlyCPUMemoryChanged: p's spec is o's but for the cpu and memory of its
// containers and pod-level resources.
func onlyCPUMemoryChanged(p, o *corev1.Pod) bool {
	spec := *p.Spec.DeepCopy()
	for i := range spec.Containers {
		spec.Containers[i] = containerWithOldCPUMemory(spec.Containers[i], o.Spec.Containers[i])
	}
	for i := range spec.InitContainers {
		spec.InitContainers[i] = containerWithOldCPUMemory(spec.InitContainers[i], o.Spec.InitContainers[i])
	}
	if podLevelSet(p) || podLevelSet(o) {
		spec.Resources = withOldCPUMemory(spec.Resources, o.Spec.Resources)
	}
	return apiequality.Semantic.DeepEqual(spec, o.Spec)
}

// containerWithOldCPUMemory is c with old's cpu and memory requests and
// limits (and no others of c's if old has none).
func containerWithOldCPUMemory(c, old corev1.Container) corev1.Container {
	c.Resources = corev1.ResourceRequirements{
		Limits:   listWithOldCPUMemory(c.Resources.Limits, old.Resources.Limits),
		Requests: listWithOldCPUMemory(c.Resources.Requests, old.Resources.Requests),
		Claims:   c.Resources.Claims,
	}
	return c
}

// withOldCPUMemory is pod-level resources r with old's cpu and memory;
// nil if that leaves nothing where old had no pod-level resources.
func withOldCPUMemory(r, old *corev1.ResourceRequirements) *corev1.ResourceRequirements {
	if r == nil {
		return nil
	}
	var oldRequests, oldLimits corev1.ResourceList
	if old != nil {
		oldRequests, oldLimits = old.Requests, old.Limits
	}
	out := r.DeepCopy()
	out.Requests, out.Limits = listWithOldCPUMemory(r.Requests, oldRequests), listWithOldCPUMemory(r.Limits, oldLimits)
	if old == nil && len(out.Requests) == 0 && len(out.Limits) == 0 && len(out.Claims) == 0 {
		return nil
	}
	return out
}

// listWithOldCPUMemory is list with old's cpu and memory in place of its
// own (nil when both are nil).
func listWithOldCPUMemory(list, old corev1.ResourceList) corev1.ResourceList {
	if list == nil && old == nil {
		return nil
	}
	out := list.DeepCopy()
	if out == nil {
		out = corev1.ResourceList{}
	}
	delete(out, corev1.ResourceCPU)
	delete(out, corev1.ResourceMemory)
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := old[name]; ok {
			out[name] = q
		}
	}
	return out
}
