package admission

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
)

// limitRangerAnnotation lists the defaults LimitRanger set on a pod.
const limitRangerAnnotation = "kubernetes.io/limit-ranger"

// LimitRanger is kube-apiserver's LimitRanger plugin: the LimitRanges of a
// pod's namespace give its containers default requests and limits
// (mutating), and bound containers, pods and claims by min, max and
// maxLimitRequestRatio (validating, 403 with kube-apiserver's messages).
// It reads its lister when that is fresh and asks the server otherwise
// (Fresh), so a LimitRange created just before always applies
// (kube-apiserver's plugin trusts its informer, and a 30 s cache of live
// lookups for a namespace whose informer has none). Asking the server for
// every pod was 6-8% of the time of a thousand pods' start
// (BenchmarkPods1000Running).
type LimitRanger struct {
	*admission.Handler
	client kubernetes.Interface
	ranges Fresh[corelisters.LimitRangeLister]
}

var (
	_ admission.MutationInterface   = (*LimitRanger)(nil)
	_ admission.ValidationInterface = (*LimitRanger)(nil)
)

// NewLimitRanger returns the plugin: it reads ranges' lister while that is
// fresh, and lists limit ranges with client otherwise (always, with a zero
// ranges).
func NewLimitRanger(client kubernetes.Interface, ranges Fresh[corelisters.LimitRangeLister]) *LimitRanger {
	return &LimitRanger{Handler: admission.NewHandler(admission.Create, admission.Update), client: client, ranges: ranges}
}

// Admit gives containers the LimitRanges' defaults they lack.
func (l *LimitRanger) Admit(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	return l.each(ctx, a, func(lr *corev1.LimitRange, obj any) error {
		if pod, ok := obj.(*corev1.Pod); ok {
			setDefaults(pod, lr)
		}
		return nil
	})
}

// Validate checks the LimitRanges' bounds.
func (l *LimitRanger) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	return l.each(ctx, a, func(lr *corev1.LimitRange, obj any) error {
		switch o := obj.(type) {
		case *corev1.Pod:
			return validatePod(lr, o)
		case *corev1.PersistentVolumeClaim:
			return validateClaim(lr, o)
		}
		return nil
	})
}

// applies: pod creates and resizes, and claim creates and updates.
func applies(a admission.Attributes) bool {
	kind := a.GetKind().GroupKind()
	pod, claim := kind == corev1.SchemeGroupVersion.WithKind("Pod").GroupKind(), kind == corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim").GroupKind()
	switch a.GetSubresource() {
	case "resize":
		return pod && a.GetOperation() == admission.Update
	case "":
		return claim || (pod && a.GetOperation() == admission.Create)
	}
	return false
}

func (l *LimitRanger) each(ctx context.Context, a admission.Attributes, f func(*corev1.LimitRange, any) error) error {
	if !applies(a) {
		return nil
	}
	if old := a.GetOldObject(); old != nil {
		if m, err := meta.Accessor(old); err == nil && m.GetDeletionTimestamp() != nil {
			return nil // being deleted: nothing to enforce
		}
	}
	ranges, err := l.limitRanges(ctx, a.GetNamespace())
	if err != nil {
		return admission.NewForbidden(a, fmt.Errorf("unable to %s %v at this time because there was an error enforcing limit ranges", a.GetOperation(), a.GetResource()))
	}
	for _, lr := range ranges {
		if err := f(lr, a.GetObject()); err != nil {
			return admission.NewForbidden(a, err)
		}
	}
	return nil
}

// limitRanges are namespace ns's LimitRanges by name, as a list of the
// server gives them (the lister's are shared: f only reads them).
func (l *LimitRanger) limitRanges(ctx context.Context, ns string) ([]*corev1.LimitRange, error) {
	if lister, ok := l.ranges.get(); ok {
		ranges, err := lister.LimitRanges(ns).List(labels.Everything())
		slices.SortFunc(ranges, func(a, b *corev1.LimitRange) int { return strings.Compare(a.Name, b.Name) })
		return ranges, err
	}
	list, err := l.client.CoreV1().LimitRanges(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	ranges := make([]*corev1.LimitRange, len(list.Items))
	for i := range list.Items {
		ranges[i] = &list.Items[i]
	}
	return ranges, nil
}

// setDefaults gives every container the Container limits' default requests
// and limits it does not set, and notes what it set in an annotation.
func setDefaults(pod *corev1.Pod, lr *corev1.LimitRange) {
	requests, limits := corev1.ResourceList{}, corev1.ResourceList{}
	for _, l := range lr.Spec.Limits {
		if l.Type == corev1.LimitTypeContainer {
			for k, v := range l.DefaultRequest {
				requests[k] = v.DeepCopy()
			}
			for k, v := range l.Default {
				limits[k] = v.DeepCopy()
			}
		}
	}
	var notes []string
	for i := range pod.Spec.Containers {
		notes = append(notes, fill(&pod.Spec.Containers[i], requests, limits, "container")...)
	}
	for i := range pod.Spec.InitContainers {
		notes = append(notes, fill(&pod.Spec.InitContainers[i], requests, limits, "init container")...)
	}
	if len(notes) > 0 {
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[limitRangerAnnotation] = "LimitRanger plugin set: " + strings.Join(notes, "; ")
	}
}

func fill(c *corev1.Container, requests, limits corev1.ResourceList, what string) []string {
	set := func(list *corev1.ResourceList, defaults corev1.ResourceList) []string {
		if *list == nil {
			*list = corev1.ResourceList{}
		}
		var names []string
		for k, v := range defaults {
			if _, ok := (*list)[k]; !ok {
				(*list)[k] = v.DeepCopy()
				names = append(names, string(k))
			}
		}
		slices.Sort(names)
		return names
	}
	var notes []string
	setLimits := set(&c.Resources.Limits, limits)
	if r := set(&c.Resources.Requests, requests); len(r) > 0 {
		notes = append(notes, fmt.Sprintf("%s request for %s %s", strings.Join(r, ", "), what, c.Name))
	}
	if len(setLimits) > 0 {
		notes = append(notes, fmt.Sprintf("%s limit for %s %s", strings.Join(setLimits, ", "), what, c.Name))
	}
	return notes
}

// validatePod checks each container against Container limits, and the
// pod's totals against Pod limits.
func validatePod(lr *corev1.LimitRange, pod *corev1.Pod) error {
	var errs []error
	for _, l := range lr.Spec.Limits {
		switch l.Type {
		case corev1.LimitTypeContainer:
			for _, c := range slices.Concat(pod.Spec.Containers, pod.Spec.InitContainers) {
				errs = append(errs, bounds(l, c.Resources.Requests, c.Resources.Limits)...)
			}
		case corev1.LimitTypePod:
			opts := resourcehelper.PodResourcesOptions{ExcludeOverhead: true}
			errs = append(errs, bounds(l, resourcehelper.PodRequests(pod, opts), resourcehelper.PodLimits(pod, opts))...)
		}
	}
	return utilerrors.NewAggregate(errs)
}

func bounds(l corev1.LimitRangeItem, requests, limits corev1.ResourceList) []error {
	var errs []error
	kind := string(l.Type)
	for k, v := range l.Min {
		errs = appendErr(errs, minimum(kind, k, v, requests, limits))
	}
	for k, v := range l.Max {
		errs = appendErr(errs, maximum(kind, k, v, requests, limits))
	}
	for k, v := range l.MaxLimitRequestRatio {
		errs = appendErr(errs, ratio(kind, k, v, requests, limits))
	}
	return errs
}

// validateClaim checks a claim's requests against PersistentVolumeClaim
// limits.
func validateClaim(lr *corev1.LimitRange, pvc *corev1.PersistentVolumeClaim) error {
	var errs []error
	for _, l := range lr.Spec.Limits {
		if l.Type != corev1.LimitTypePersistentVolumeClaim {
			continue
		}
		kind := string(l.Type)
		for k, v := range l.Min {
			errs = appendErr(errs, minimum(kind, k, v, pvc.Spec.Resources.Requests, corev1.ResourceList{}))
		}
		for k, v := range l.Max {
			errs = appendErr(errs, maxRequest(kind, k, v, pvc.Spec.Resources.Requests))
		}
	}
	return utilerrors.NewAggregate(errs)
}

func appendErr(errs []error, err error) []error {
	if err != nil {
		return append(errs, err)
	}
	return errs
}

// values compares in milli-units unless a value is too large for them.
func values(request, limit, enforced resource.Quantity) (int64, int64, int64) {
	r, l, e := request.Value(), limit.Value(), enforced.Value()
	if r <= resource.MaxMilliValue && l <= resource.MaxMilliValue && e <= resource.MaxMilliValue {
		return request.MilliValue(), limit.MilliValue(), enforced.MilliValue()
	}
	return r, l, e
}

func minimum(kind string, name corev1.ResourceName, enforced resource.Quantity, requests, limits corev1.ResourceList) error {
	req, hasReq := requests[name]
	lim, hasLim := limits[name]
	r, l, e := values(req, lim, enforced)
	switch {
	case !hasReq:
		return fmt.Errorf("minimum %s usage per %s is %s.  No request is specified", name, kind, enforced.String())
	case r < e:
		return fmt.Errorf("minimum %s usage per %s is %s, but request is %s", name, kind, enforced.String(), req.String())
	case hasLim && l < e:
		return fmt.Errorf("minimum %s usage per %s is %s, but limit is %s", name, kind, enforced.String(), lim.String())
	}
	return nil
}

func maximum(kind string, name corev1.ResourceName, enforced resource.Quantity, requests, limits corev1.ResourceList) error {
	req, hasReq := requests[name]
	lim, hasLim := limits[name]
	r, l, e := values(req, lim, enforced)
	switch {
	case !hasLim:
		return fmt.Errorf("maximum %s usage per %s is %s.  No limit is specified", name, kind, enforced.String())
	case l > e:
		return fmt.Errorf("maximum %s usage per %s is %s, but limit is %s", name, kind, enforced.String(), lim.String())
	case hasReq && r > e:
		return fmt.Errorf("maximum %s usage per %s is %s, but request is %s", name, kind, enforced.String(), req.String())
	}
	return nil
}

func maxRequest(kind string, name corev1.ResourceName, enforced resource.Quantity, requests corev1.ResourceList) error {
	req, hasReq := requests[name]
	r, _, e := values(req, resource.Quantity{}, enforced)
	switch {
	case !hasReq:
		return fmt.Errorf("maximum %s usage per %s is %s.  No request is specified", name, kind, enforced.String())
	case r > e:
		return fmt.Errorf("maximum %s usage per %s is %s, but request is %s", name, kind, enforced.String(), req.String())
	}
	return nil
}

func ratio(kind string, name corev1.ResourceName, enforced resource.Quantity, requests, limits corev1.ResourceList) error {
	req, hasReq := requests[name]
	lim, hasLim := limits[name]
	r, l, _ := values(req, lim, enforced)
	if !hasReq || r == 0 {
		return fmt.Errorf("%s max limit to request ratio per %s is %s, but no request is specified or request is 0", name, kind, enforced.String())
	}
	if !hasLim || l == 0 {
		return fmt.Errorf("%s max limit to request ratio per %s is %s, but no limit is specified or limit is 0", name, kind, enforced.String())
	}
	observed := float64(l) / float64(r)
	scaled, allowed := observed, float64(enforced.Value())
	if enforced.Value() <= resource.MaxMilliValue {
		scaled, allowed = observed*1000, float64(enforced.MilliValue())
	}
	if scaled > allowed {
		return fmt.Errorf("%s max limit to request ratio per %s is %s, but provided ratio is %f", name, kind, enforced.String(), observed)
	}
	return nil
}
