// Package apps serves apps/v1. So far: deployments, with the status and
// scale subresources.
package apps

import (
	"context"
	"fmt"
	"reflect"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage/names"

	"github.com/kubeembed/apiserver/providers"
	"github.com/kubeembed/apiserver/providers/core"
	"github.com/kubeembed/apiserver/providers/registry"
)

// Provider serves apps/v1.
type Provider struct{}

var _ providers.Provider = Provider{}

// GroupName implements providers.Provider.
func (Provider) GroupName() string { return appsv1.GroupName }

// Install implements providers.Provider.
func (Provider) Install(scheme *runtime.Scheme) error {
	for _, add := range []func(*runtime.Scheme) error{appsv1.AddToScheme, autoscalingv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	// The scale subresource speaks autoscaling/v1 Scale.
	for _, gv := range []schema.GroupVersion{appsv1.SchemeGroupVersion, autoscalingv1.SchemeGroupVersion} {
		if err := providers.AddInternalVersion(scheme, gv); err != nil {
			return err
		}
	}
	scheme.AddTypeDefaultingFunc(&appsv1.Deployment{}, func(obj any) { defaultDeployment(obj.(*appsv1.Deployment)) })
	if err := registry.FieldLabelConversion(scheme, appsv1.SchemeGroupVersion.WithKind("Deployment"), true); err != nil {
		return err
	}
	return scheme.SetVersionPriority(appsv1.SchemeGroupVersion)
}

func defaultDeployment(d *appsv1.Deployment) {
	if d.Spec.Replicas == nil {
		one := int32(1)
		d.Spec.Replicas = &one
	}
	s := &d.Spec.Strategy
	if s.Type == "" {
		s.Type = appsv1.RollingUpdateDeploymentStrategyType
	}
	if s.Type == appsv1.RollingUpdateDeploymentStrategyType {
		if s.RollingUpdate == nil {
			s.RollingUpdate = &appsv1.RollingUpdateDeployment{}
		}
		quarter := intstr.FromString("25%")
		if s.RollingUpdate.MaxUnavailable == nil {
			v := quarter
			s.RollingUpdate.MaxUnavailable = &v
		}
		if s.RollingUpdate.MaxSurge == nil {
			v := quarter
			s.RollingUpdate.MaxSurge = &v
		}
	}
	if d.Spec.RevisionHistoryLimit == nil {
		ten := int32(10)
		d.Spec.RevisionHistoryLimit = &ten
	}
	if d.Spec.ProgressDeadlineSeconds == nil {
		v := int32(600)
		d.Spec.ProgressDeadlineSeconds = &v
	}
	core.DefaultPodTemplateSpec(&d.Spec.Template)
}

// Storage implements providers.Provider.
func (Provider) Storage(ctx providers.Context) (map[string]map[string]rest.Storage, error) {
	gv := appsv1.SchemeGroupVersion
	st := &registry.Strategy{ObjectTyper: ctx.Scheme, NameGenerator: names.SimpleNameGenerator, Namespaced: true}
	st.ResetFields = registry.ResetStatus(gv)
	st.PrepareCreate = func(_ context.Context, obj runtime.Object) {
		d := obj.(*appsv1.Deployment)
		d.Status = appsv1.DeploymentStatus{}
		d.Generation = 1
	}
	st.PrepareUpdate = func(_ context.Context, obj, old runtime.Object) {
		d, o := obj.(*appsv1.Deployment), old.(*appsv1.Deployment)
		d.Status = o.Status
		// Spec changes, and annotations that roll back, bump the generation.
		if !reflect.DeepEqual(d.Spec, o.Spec) {
			d.Generation = o.Generation + 1
		}
	}
	st.ValidateCreate = func(_ context.Context, obj runtime.Object) field.ErrorList {
		d := obj.(*appsv1.Deployment)
		errs := apivalidation.ValidateObjectMeta(&d.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
		return append(errs, validateDeploymentSpec(&d.Spec, field.NewPath("spec"))...)
	}
	st.ValidateOnUpdate = func(_ context.Context, obj, old runtime.Object) field.ErrorList {
		d, o := obj.(*appsv1.Deployment), old.(*appsv1.Deployment)
		errs := apivalidation.ValidateObjectMetaUpdate(&d.ObjectMeta, &o.ObjectMeta, field.NewPath("metadata"))
		errs = append(errs, validateDeploymentSpec(&d.Spec, field.NewPath("spec"))...)
		return append(errs, apivalidation.ValidateImmutableField(d.Spec.Selector, o.Spec.Selector, field.NewPath("spec", "selector"))...)
	}
	store, err := registry.NewStore(ctx, registry.StoreConfig{
		Resource: appsv1.Resource("deployments"), Singular: "deployment",
		NewFunc:  func() runtime.Object { return &appsv1.Deployment{} },
		NewList:  func() runtime.Object { return &appsv1.DeploymentList{} },
		Strategy: st, ShortNames: []string{"deploy"}, Categories: []string{"all"},
		Table:    deploymentTable(),
		AttrFunc: registry.AttrFunc[*appsv1.Deployment](true, nil),
	})
	if err != nil {
		return nil, err
	}

	status := &registry.Strategy{ObjectTyper: ctx.Scheme, NameGenerator: names.SimpleNameGenerator, Namespaced: true}
	status.ResetFields = registry.ResetSpec(gv, "metadata.labels")
	status.PrepareUpdate = func(_ context.Context, obj, old runtime.Object) {
		d, o := obj.(*appsv1.Deployment), old.(*appsv1.Deployment)
		d.Spec = o.Spec
		d.Labels = o.Labels
	}
	status.ValidateOnUpdate = func(_ context.Context, obj, old runtime.Object) field.ErrorList {
		d, o := obj.(*appsv1.Deployment), old.(*appsv1.Deployment)
		errs := apivalidation.ValidateObjectMetaUpdate(&d.ObjectMeta, &o.ObjectMeta, field.NewPath("metadata"))
		p := field.NewPath("status")
		for _, f := range []struct {
			name string
			v    int32
		}{{"replicas", d.Status.Replicas}, {"updatedReplicas", d.Status.UpdatedReplicas}, {"readyReplicas", d.Status.ReadyReplicas},
			{"availableReplicas", d.Status.AvailableReplicas}, {"unavailableReplicas", d.Status.UnavailableReplicas}} {
			errs = append(errs, apivalidation.ValidateNonnegativeField(int64(f.v), p.Child(f.name))...)
		}
		return errs
	}
	return map[string]map[string]rest.Storage{"v1": {
		"deployments":        store,
		"deployments/status": registry.Subresource(store, status, status),
		"deployments/scale":  &scaleREST{store: store},
	}}, nil
}

func validateDeploymentSpec(s *appsv1.DeploymentSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Replicas != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*s.Replicas), p.Child("replicas"))...)
	}
	if s.Selector == nil {
		errs = append(errs, field.Required(p.Child("selector"), ""))
	} else {
		errs = append(errs, metav1validation.ValidateLabelSelector(s.Selector, metav1validation.LabelSelectorValidationOptions{}, p.Child("selector"))...)
		if len(s.Selector.MatchLabels)+len(s.Selector.MatchExpressions) == 0 {
			errs = append(errs, field.Invalid(p.Child("selector"), s.Selector, "empty selector is invalid for deployment"))
		}
	}
	if sel, err := metav1.LabelSelectorAsSelector(s.Selector); err == nil && s.Selector != nil && !sel.Empty() {
		if !sel.Matches(labels.Set(s.Template.Labels)) {
			errs = append(errs, field.Invalid(p.Child("template", "metadata", "labels"), s.Template.Labels, "`selector` does not match template `labels`"))
		}
	}
	errs = append(errs, core.ValidatePodTemplateSpec(&s.Template, p.Child("template"))...)
	if s.Template.Spec.RestartPolicy != "" && s.Template.Spec.RestartPolicy != "Always" {
		errs = append(errs, field.NotSupported(p.Child("template", "spec", "restartPolicy"), s.Template.Spec.RestartPolicy, []string{"Always"}))
	}
	if s.Template.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Forbidden(p.Child("template", "spec", "activeDeadlineSeconds"), "activeDeadlineSeconds in ReplicaSet is not Supported"))
	}
	errs = append(errs, validateStrategy(&s.Strategy, p.Child("strategy"))...)
	if s.RevisionHistoryLimit != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*s.RevisionHistoryLimit), p.Child("revisionHistoryLimit"))...)
	}
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(s.MinReadySeconds), p.Child("minReadySeconds"))...)
	if d := s.ProgressDeadlineSeconds; d != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*d), p.Child("progressDeadlineSeconds"))...)
		if *d <= s.MinReadySeconds {
			errs = append(errs, field.Invalid(p.Child("progressDeadlineSeconds"), *d, "must be greater than minReadySeconds"))
		}
	}
	return errs
}

func validateStrategy(s *appsv1.DeploymentStrategy, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch s.Type {
	case appsv1.RecreateDeploymentStrategyType:
		if s.RollingUpdate != nil {
			errs = append(errs, field.Forbidden(p.Child("rollingUpdate"), "may not be specified when strategy `type` is 'Recreate'"))
		}
	case appsv1.RollingUpdateDeploymentStrategyType:
		if s.RollingUpdate == nil {
			errs = append(errs, field.Required(p.Child("rollingUpdate"), "this should be defaulted and never be nil"))
			break
		}
		ru := s.RollingUpdate
		errs = append(errs, validateIntOrPercent(ru.MaxUnavailable, p.Child("rollingUpdate", "maxUnavailable"))...)
		errs = append(errs, validateIntOrPercent(ru.MaxSurge, p.Child("rollingUpdate", "maxSurge"))...)
		if isZero(ru.MaxUnavailable) && isZero(ru.MaxSurge) {
			errs = append(errs, field.Invalid(p.Child("rollingUpdate", "maxUnavailable"), ru.MaxUnavailable.String(), "may not be 0 when `maxSurge` is 0"))
		}
		if ru.MaxUnavailable != nil && ru.MaxUnavailable.Type == intstr.String && percent(ru.MaxUnavailable) > 100 {
			errs = append(errs, field.Invalid(p.Child("rollingUpdate", "maxUnavailable"), ru.MaxUnavailable.String(), "must not be greater than 100%"))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("type"), s.Type, []string{string(appsv1.RecreateDeploymentStrategyType), string(appsv1.RollingUpdateDeploymentStrategyType)}))
	}
	return errs
}

func validateIntOrPercent(v *intstr.IntOrString, p *field.Path) field.ErrorList {
	if v == nil {
		return nil
	}
	if v.Type == intstr.Int {
		return apivalidation.ValidateNonnegativeField(int64(v.IntVal), p)
	}
	if percent(v) < 0 {
		return field.ErrorList{field.Invalid(p, v.StrVal, "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')")}
	}
	return nil
}

// percent parses "N%"; -1 if it is not one.
func percent(v *intstr.IntOrString) int {
	s := v.StrVal
	if !strings.HasSuffix(s, "%") || len(s) < 2 {
		return -1
	}
	n := 0
	for _, c := range s[:len(s)-1] {
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int(c-'0')
	}
	return n
}

func isZero(v *intstr.IntOrString) bool {
	if v == nil {
		return true
	}
	if v.Type == intstr.Int {
		return v.IntVal == 0
	}
	return percent(v) == 0
}

func deploymentTable() rest.TableConvertor {
	c := func(name, typ, desc string, priority int32, f func(d *appsv1.Deployment) any) registry.Column {
		return registry.Column{
			TableColumnDefinition: metav1.TableColumnDefinition{Name: name, Type: typ, Description: desc, Priority: priority},
			Value:                 func(o runtime.Object) any { return f(o.(*appsv1.Deployment)) },
		}
	}
	return registry.Table(registry.NameColumn(),
		c("Ready", "string", "Number of the pod with ready state", 0, func(d *appsv1.Deployment) any {
			want := int32(0)
			if d.Spec.Replicas != nil {
				want = *d.Spec.Replicas
			}
			return fmt.Sprintf("%d/%d", d.Status.ReadyReplicas, want)
		}),
		c("Up-to-date", "integer", "Total number of non-terminated pods targeted by this deployment that have the desired template spec.", 0, func(d *appsv1.Deployment) any { return int64(d.Status.UpdatedReplicas) }),
		c("Available", "integer", "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.", 0, func(d *appsv1.Deployment) any { return int64(d.Status.AvailableReplicas) }),
		registry.AgeColumn(),
		c("Containers", "string", "Names of each container in the template.", 1, func(d *appsv1.Deployment) any {
			var n []string
			for _, ctr := range d.Spec.Template.Spec.Containers {
				n = append(n, ctr.Name)
			}
			return strings.Join(n, ",")
		}),
		c("Images", "string", "Images referenced by each container in the template.", 1, func(d *appsv1.Deployment) any {
			var n []string
			for _, ctr := range d.Spec.Template.Spec.Containers {
				n = append(n, ctr.Image)
			}
			return strings.Join(n, ",")
		}),
		c("Selector", "string", "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment.", 1, func(d *appsv1.Deployment) any {
			return metav1.FormatLabelSelector(d.Spec.Selector)
		}),
	)
}

// scaleREST serves deployments/scale as autoscaling/v1 Scale.
type scaleREST struct{ store *registry.Store }

var (
	_ rest.Patcher                  = (*scaleREST)(nil)
	_ rest.GroupVersionKindProvider = (*scaleREST)(nil)
)

func (r *scaleREST) New() runtime.Object { return &autoscalingv1.Scale{} }
func (r *scaleREST) Destroy()            {}

// GroupVersionKind implements rest.GroupVersionKindProvider.
func (r *scaleREST) GroupVersionKind(schema.GroupVersion) schema.GroupVersionKind {
	return autoscalingv1.SchemeGroupVersion.WithKind("Scale")
}

func (r *scaleREST) Get(ctx context.Context, name string, opts *metav1.GetOptions) (runtime.Object, error) {
	obj, err := r.store.Get(ctx, name, opts)
	if err != nil {
		return nil, err
	}
	return scaleOf(obj.(*appsv1.Deployment)), nil
}

func scaleOf(d *appsv1.Deployment) *autoscalingv1.Scale {
	replicas := int32(0)
	if d.Spec.Replicas != nil {
		replicas = *d.Spec.Replicas
	}
	sel := ""
	if s, err := metav1.LabelSelectorAsSelector(d.Spec.Selector); err == nil {
		sel = s.String()
	}
	return &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: d.Name, Namespace: d.Namespace, UID: d.UID,
			ResourceVersion: d.ResourceVersion, CreationTimestamp: d.CreationTimestamp},
		Spec:   autoscalingv1.ScaleSpec{Replicas: replicas},
		Status: autoscalingv1.ScaleStatus{Replicas: d.Status.Replicas, Selector: sel},
	}
}

// Update implements rest.Updater: it sets spec.replicas of the deployment,
// honouring the Scale's resourceVersion as a precondition.
func (r *scaleREST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc,
	updateValidation rest.ValidateObjectUpdateFunc, _ bool, opts *metav1.UpdateOptions) (runtime.Object, bool, error) {
	obj, _, err := r.store.Update(ctx, name, &scaleUpdate{inner: objInfo, updateValidation: updateValidation},
		createValidation, rest.ValidateAllObjectUpdateFunc, false, opts)
	if err != nil {
		return nil, false, err
	}
	return scaleOf(obj.(*appsv1.Deployment)), false, nil
}

// scaleUpdate applies a Scale to a Deployment inside the store's update.
type scaleUpdate struct {
	inner            rest.UpdatedObjectInfo
	updateValidation rest.ValidateObjectUpdateFunc
}

func (u *scaleUpdate) Preconditions() *metav1.Preconditions { return u.inner.Preconditions() }

func (u *scaleUpdate) UpdatedObject(ctx context.Context, oldObj runtime.Object) (runtime.Object, error) {
	d := oldObj.(*appsv1.Deployment).DeepCopy()
	oldScale := scaleOf(d)
	obj, err := u.inner.UpdatedObject(ctx, oldScale)
	if err != nil {
		return nil, err
	}
	scale, ok := obj.(*autoscalingv1.Scale)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("expected input object type to be Scale, but %T", obj))
	}
	if scale.Spec.Replicas < 0 {
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: autoscalingv1.GroupName, Kind: "Scale"}, name(scale),
			field.ErrorList{field.Invalid(field.NewPath("spec", "replicas"), scale.Spec.Replicas, "must be greater than or equal to 0")})
	}
	if u.updateValidation != nil {
		if err := u.updateValidation(ctx, scale, oldScale); err != nil {
			return nil, err
		}
	}
	if scale.ResourceVersion != "" {
		d.ResourceVersion = scale.ResourceVersion // conflicts like the real server
	}
	replicas := scale.Spec.Replicas
	d.Spec.Replicas = &replicas
	return d, nil
}

func name(s *autoscalingv1.Scale) string { return s.Name }
