package core

import (
	"context"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"

	"github.com/kubeembed/apiserver/providers/registry"
)

// bindingREST is pods/binding: what a scheduler posts to put a pod on a
// node.
type bindingREST struct{ pods *registry.Store }

var (
	_ rest.NamedCreater         = (*bindingREST)(nil)
	_ rest.SingularNameProvider = (*bindingREST)(nil)

	_ rest.SubresourceObjectMetaPreserver = (*bindingREST)(nil)
)

func (*bindingREST) New() runtime.Object     { return &corev1.Binding{} }
func (*bindingREST) Destroy()                {}
func (*bindingREST) NamespaceScoped() bool   { return true }
func (*bindingREST) GetSingularName() string { return "binding" }

// PreserveRequestObjectMetaSystemFieldsOnSubresourceCreate implements
// rest.SubresourceObjectMetaPreserver: the binding's uid and
// resourceVersion are the pod's preconditions.
func (*bindingREST) PreserveRequestObjectMetaSystemFieldsOnSubresourceCreate() bool { return true }

// Create implements rest.NamedCreater: the binding's name is the pod's.
func (r *bindingREST) Create(ctx context.Context, name string, obj runtime.Object, validate rest.ValidateObjectFunc, opts *metav1.CreateOptions) (runtime.Object, error) {
	b, ok := obj.(*corev1.Binding)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a Binding object: %#v", obj))
	}
	if name != b.Name {
		return nil, apierrors.NewBadRequest("name in URL does not match name in Binding object")
	}
	var errs field.ErrorList
	if b.Target.Kind != "" && b.Target.Kind != "Node" {
		errs = append(errs, field.NotSupported(field.NewPath("target", "kind"), b.Target.Kind, []string{"Node", "<empty>"}))
	}
	if b.Target.Name == "" {
		errs = append(errs, field.Required(field.NewPath("target", "name"), ""))
	}
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Binding").GroupKind(), b.Name, errs)
	}
	if validate != nil {
		if err := validate(ctx, b.DeepCopyObject()); err != nil {
			return nil, err
		}
	}
	var preconditions *storage.Preconditions
	if b.UID != "" || b.ResourceVersion != "" {
		preconditions = &storage.Preconditions{}
		if b.UID != "" {
			preconditions.UID = &b.UID
		}
		if b.ResourceVersion != "" {
			preconditions.ResourceVersion = &b.ResourceVersion
		}
	}
	dryRun := len(opts.DryRun) > 0
	key, err := r.pods.KeyFunc(ctx, b.Name)
	if err != nil {
		return nil, err
	}
	err = r.pods.Storage.GuaranteedUpdate(ctx, key, &corev1.Pod{}, false, preconditions, func(obj runtime.Object, _ storage.ResponseMeta) (runtime.Object, *uint64, error) {
		p := obj.(*corev1.Pod)
		switch {
		case p.DeletionTimestamp != nil:
			return nil, nil, fmt.Errorf("pod %s is being deleted, cannot be assigned to a host", p.Name)
		case p.Spec.NodeName != "":
			return nil, nil, fmt.Errorf("pod %v is already assigned to node %q", p.Name, p.Spec.NodeName)
		case len(p.Spec.SchedulingGates) != 0:
			return nil, nil, fmt.Errorf("pod %v has non-empty .spec.schedulingGates", p.Name)
		}
		p.Spec.NodeName = b.Target.Name
		p.Status.NominatedNodeName = "" // ClearingNominatedNodeNameAfterBinding, on in v1.37
		for k, v := range b.Annotations {
			if p.Annotations == nil {
				p.Annotations = map[string]string{}
			}
			p.Annotations[k] = v
		}
		// The binding's labels are the node's topology labels the
		// PodTopologyLabels admission plugin put there.
		for k, v := range b.Labels {
			if p.Labels == nil {
				p.Labels = map[string]string{}
			}
			p.Labels[k] = v
		}
		setCondition(&p.Status, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()})
		return p, nil, nil
	}, dryRun, nil)
	if err != nil {
		if storage.IsNotFound(err) {
			return nil, apierrors.NewNotFound(corev1.Resource("pods"), b.Name)
		}
		if _, isStatus := err.(apierrors.APIStatus); !isStatus {
			err = apierrors.NewConflict(corev1.Resource("pods/binding"), b.Name, err)
		}
		return nil, err
	}
	return &metav1.Status{Status: metav1.StatusSuccess, Code: http.StatusCreated}, nil
}

// legacyBindingREST is the legacy form, POST .../namespaces/NS/bindings,
// which names the pod in the body.
type legacyBindingREST struct{ bindingREST }

var _ rest.Creater = (*legacyBindingREST)(nil)

// Create implements rest.Creater.
func (r *legacyBindingREST) Create(ctx context.Context, obj runtime.Object, validate rest.ValidateObjectFunc, opts *metav1.CreateOptions) (runtime.Object, error) {
	b, ok := obj.(*corev1.Binding)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a Binding object: %#v", obj))
	}
	return r.bindingREST.Create(ctx, b.Name, obj, validate, opts)
}

func setCondition(s *corev1.PodStatus, c corev1.PodCondition) {
	for i := range s.Conditions {
		if s.Conditions[i].Type == c.Type {
			if s.Conditions[i].Status == c.Status {
				return
			}
			s.Conditions[i] = c
			return
		}
	}
	s.Conditions = append(s.Conditions, c)
}

// evictionREST is pods/eviction: a delete that respects the pod disruption
// budgets of the pod's namespace. Nothing here keeps budgets' status up to
// date (the disruption controller does that in a cluster), so a budget
// allows what its status.disruptionsAllowed says.
type evictionREST struct {
	pods *registry.Store
	pdbs *registry.Store
}

var (
	_ rest.NamedCreater             = (*evictionREST)(nil)
	_ rest.GroupVersionKindProvider = (*evictionREST)(nil)
)

func (*evictionREST) New() runtime.Object     { return &policyv1.Eviction{} }
func (*evictionREST) Destroy()                {}
func (*evictionREST) NamespaceScoped() bool   { return true }
func (*evictionREST) GetSingularName() string { return "eviction" }

// GroupVersionKind implements rest.GroupVersionKindProvider: the body is a
// policy/v1 Eviction, whatever the version of the pods it is posted to.
func (*evictionREST) GroupVersionKind(schema.GroupVersion) schema.GroupVersionKind {
	return policyv1.SchemeGroupVersion.WithKind("Eviction")
}

// Create implements rest.NamedCreater.
func (r *evictionREST) Create(ctx context.Context, name string, obj runtime.Object, validate rest.ValidateObjectFunc, opts *metav1.CreateOptions) (runtime.Object, error) {
	ev, ok := obj.(*policyv1.Eviction)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a Eviction object: %T", obj))
	}
	if name != ev.Name {
		return nil, apierrors.NewBadRequest("name in URL does not match name in Eviction object")
	}
	if validate != nil {
		if err := validate(ctx, ev.DeepCopyObject()); err != nil {
			return nil, err
		}
	}
	got, err := r.pods.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	pod := got.(*corev1.Pod)
	del := ev.DeleteOptions
	if del == nil {
		del = &metav1.DeleteOptions{}
	}
	if len(opts.DryRun) > 0 {
		del = del.DeepCopy()
		del.DryRun = opts.DryRun
	}
	// Pods that are done, or not running yet, need no budget.
	if !terminal(pod.Status.Phase) && pod.Status.Phase != corev1.PodPending && pod.DeletionTimestamp == nil {
		list, err := r.pdbs.List(ctx, &metainternalversion.ListOptions{})
		if err != nil {
			return nil, err
		}
		var matching []policyv1.PodDisruptionBudget
		for _, pdb := range list.(*policyv1.PodDisruptionBudgetList).Items {
			sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
			if err != nil || sel.Empty() || !sel.Matches(labels.Set(pod.Labels)) {
				continue
			}
			matching = append(matching, pdb)
		}
		switch {
		case len(matching) > 1:
			return nil, apierrors.NewInternalError(fmt.Errorf("this pod has more than one PodDisruptionBudget, which the eviction subresource does not support"))
		case len(matching) == 1:
			if err := r.takeDisruption(ctx, matching[0].Name, pod.Name, len(opts.DryRun) > 0); err != nil {
				return nil, err
			}
		}
	}
	if _, _, err := r.pods.Delete(ctx, name, rest.ValidateAllObjectFunc, del); err != nil {
		return nil, err
	}
	return &metav1.Status{Status: metav1.StatusSuccess, Code: http.StatusCreated}, nil
}

// takeDisruption checks that the budget allows a disruption and records it
// in the budget's status (disruptionsAllowed minus one, the pod among the
// disrupted ones), as kube-apiserver does before deleting an evicted pod.
func (r *evictionREST) takeDisruption(ctx context.Context, budget, pod string, dryRun bool) error {
	key, err := r.pdbs.KeyFunc(ctx, budget)
	if err != nil {
		return err
	}
	return r.pdbs.Storage.GuaranteedUpdate(ctx, key, &policyv1.PodDisruptionBudget{}, false, nil, func(obj runtime.Object, _ storage.ResponseMeta) (runtime.Object, *uint64, error) {
		pdb := obj.(*policyv1.PodDisruptionBudget)
		cause := func(msg string) metav1.StatusCause {
			return metav1.StatusCause{Type: policyv1.DisruptionBudgetCause, Message: msg}
		}
		switch {
		case pdb.Status.ObservedGeneration < pdb.Generation:
			err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
			err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, cause(fmt.Sprintf("The disruption budget %s is still being processed by the server.", pdb.Name)))
			return nil, nil, err
		case pdb.Status.DisruptionsAllowed < 0:
			err := apierrors.NewForbidden(policyv1.Resource("poddisruptionbudget"), pdb.Name, fmt.Errorf("pdb disruptions allowed is negative"))
			err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, cause(fmt.Sprintf("The disruption budget %s does not allow evicting pods currently: pdb disruptions allowed is negative", pdb.Name)))
			return nil, nil, err
		case pdb.Status.DisruptionsAllowed == 0:
			err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
			msg := fmt.Sprintf("The disruption budget %s does not allow evicting pods currently", pdb.Name)
			if pdb.Status.CurrentHealthy <= pdb.Status.DesiredHealthy {
				msg = fmt.Sprintf("The disruption budget %s needs %d healthy pods and has %d currently", pdb.Name, pdb.Status.DesiredHealthy, pdb.Status.CurrentHealthy)
			}
			err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, cause(msg))
			return nil, nil, err
		}
		pdb.Status.DisruptionsAllowed--
		if pdb.Status.DisruptedPods == nil {
			pdb.Status.DisruptedPods = map[string]metav1.Time{}
		}
		pdb.Status.DisruptedPods[pod] = metav1.Now()
		return pdb, nil, nil
	}, dryRun, nil)
}

// podSubresourceStrategies returns the strategies of pods/ephemeralcontainers
// (only spec.ephemeralContainers may change, by adding containers) and
// pods/resize (only containers' resources and resize policies).
func podSubresourceStrategies(base *registry.Strategy) (ephemeral, resize *registry.Strategy) {
	ephemeral, resize = &registry.Strategy{}, &registry.Strategy{}
	*ephemeral, *resize = *base, *base
	ephemeral.Generation, resize.Generation = false, false
	ephemeralContainers(ephemeral)
	resizeResources(resize)
	return ephemeral, resize
}

// ephemeralContainers makes st write a pod's ephemeral containers: added,
// never changed or removed.
func ephemeralContainers(st *registry.Strategy) {
	st.PrepareUpdate = func(_ context.Context, obj, old runtime.Object) {
		p, o := obj.(*corev1.Pod), old.(*corev1.Pod)
		ec := p.Spec.EphemeralContainers
		p.Spec = o.Spec
		p.Spec.EphemeralContainers = ec
		p.Status = o.Status
		p.Generation = o.Generation
		if !apiequality.Semantic.DeepEqual(ec, o.Spec.EphemeralContainers) {
			p.Generation++
		}
	}
	st.ValidateOnUpdate = func(_ context.Context, obj, old runtime.Object) field.ErrorList {
		p, o := obj.(*corev1.Pod), old.(*corev1.Pod)
		var errs field.ErrorList
		path := field.NewPath("spec", "ephemeralContainers")
		seen := map[string]bool{}
		for _, c := range p.Spec.Containers {
			seen[c.Name] = true
		}
		for _, c := range p.Spec.InitContainers {
			seen[c.Name] = true
		}
		for i, c := range p.Spec.EphemeralContainers {
			if c.Name == "" {
				errs = append(errs, field.Required(path.Index(i).Child("name"), ""))
			} else if seen[c.Name] {
				errs = append(errs, field.Duplicate(path.Index(i).Child("name"), c.Name))
			}
			seen[c.Name] = true
			if c.Image == "" {
				errs = append(errs, field.Required(path.Index(i).Child("image"), ""))
			}
		}
		// Ephemeral containers can be added, never changed or removed.
		for i, c := range o.Spec.EphemeralContainers {
			if i >= len(p.Spec.EphemeralContainers) || !apiequality.Semantic.DeepEqual(c, p.Spec.EphemeralContainers[i]) {
				errs = append(errs, field.Forbidden(path, "existing ephemeral containers may not be changed"))
				break
			}
		}
		return errs
	}
}
