package registry

import (
	"context"
	"fmt"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/rest"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// ScaleAccess reads and writes the replica counts of a scalable object.
type ScaleAccess struct {
	// Replicas returns spec.replicas.
	Replicas func(obj runtime.Object) int32
	// SetReplicas sets spec.replicas.
	SetReplicas func(obj runtime.Object, replicas int32)
	// StatusReplicas returns status.replicas.
	StatusReplicas func(obj runtime.Object) int32
	// Selector returns the label selector of the object's pods.
	Selector func(obj runtime.Object) *metav1.LabelSelector
	// GroupVersion is the object's; Workload sets it. With it, writes to
	// /scale are recorded in the object's managed fields as the scale
	// subresource's, owning spec.replicas, as kube-apiserver records them.
	GroupVersion schema.GroupVersion
}

// scaleStorage returns the scale subresource of the objects in s, served as
// autoscaling/v1 Scale, as kube-apiserver serves deployments/scale and
// the others. Its provider must register autoscaling/v1 as external and
// internal version.
func scaleStorage(s *Store, access ScaleAccess) rest.Storage {
	return &scaleREST{store: s, access: access}
}

type scaleREST struct {
	store  *Store
	access ScaleAccess
}

var (
	_ rest.Patcher                  = (*scaleREST)(nil)
	_ rest.GroupVersionKindProvider = (*scaleREST)(nil)
	_ rest.TableConvertor           = (*scaleREST)(nil)
)

// ConvertToTable implements rest.TableConvertor. kube-apiserver's scale
// storage hands tables to the object's printers, which print a Scale with
// these columns (a NAME without the "name" format).
func (r *scaleREST) ConvertToTable(ctx context.Context, object runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	name := NameColumn()
	name.Format = ""
	return tableConvertor{columns: []Column{
		name,
		ColumnOf("Desired", "integer", autoscalingv1.ScaleSpec{}.SwaggerDoc()["replicas"], 0,
			func(s *autoscalingv1.Scale) any { return int64(s.Spec.Replicas) }),
		ColumnOf("Available", "integer", autoscalingv1.ScaleStatus{}.SwaggerDoc()["replicas"], 0,
			func(s *autoscalingv1.Scale) any { return int64(s.Status.Replicas) }),
		AgeColumn(),
	}}.ConvertToTable(ctx, object, tableOptions)
}

func (r *scaleREST) New() runtime.Object { return &autoscalingv1.Scale{} }
func (r *scaleREST) Destroy()            {}

// GroupVersionKind implements rest.GroupVersionKindProvider.
func (r *scaleREST) GroupVersionKind(schema.GroupVersion) schema.GroupVersionKind {
	return autoscalingv1.SchemeGroupVersion.WithKind("Scale")
}

// Get implements rest.Getter.
func (r *scaleREST) Get(ctx context.Context, name string, opts *metav1.GetOptions) (runtime.Object, error) {
	obj, err := r.store.Get(ctx, name, opts)
	if err != nil {
		return nil, err
	}
	return r.scaleOf(obj)
}

func (r *scaleREST) scaleOf(obj runtime.Object) (*autoscalingv1.Scale, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	sel := ""
	if s, err := metav1.LabelSelectorAsSelector(r.access.Selector(obj)); err == nil {
		sel = s.String()
	}
	return &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: m.GetName(), Namespace: m.GetNamespace(), UID: m.GetUID(),
			ResourceVersion: m.GetResourceVersion(), CreationTimestamp: m.GetCreationTimestamp()},
		Spec:   autoscalingv1.ScaleSpec{Replicas: r.access.Replicas(obj)},
		Status: autoscalingv1.ScaleStatus{Replicas: r.access.StatusReplicas(obj), Selector: sel},
	}, nil
}

// Update implements rest.Updater: it sets spec.replicas, honouring the
// Scale's resourceVersion as a precondition.
func (r *scaleREST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc,
	updateValidation rest.ValidateObjectUpdateFunc, _ bool, opts *metav1.UpdateOptions) (runtime.Object, bool, error) {
	obj, _, err := r.store.Update(ctx, name, &scaleUpdate{r: r, inner: objInfo, updateValidation: updateValidation},
		createValidation, rest.ValidateAllObjectUpdateFunc, false, opts)
	if err != nil {
		return nil, false, err
	}
	s, err := r.scaleOf(obj)
	return s, false, err
}

// scaleUpdate applies a Scale to its object inside the store's update.
type scaleUpdate struct {
	r                *scaleREST
	inner            rest.UpdatedObjectInfo
	updateValidation rest.ValidateObjectUpdateFunc
}

func (u *scaleUpdate) Preconditions() *metav1.Preconditions { return u.inner.Preconditions() }

func (u *scaleUpdate) UpdatedObject(ctx context.Context, oldObj runtime.Object) (runtime.Object, error) {
	obj := oldObj.DeepCopyObject()
	oldScale, err := u.r.scaleOf(obj)
	if err != nil {
		return nil, err
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	var fields *managedfields.ScaleHandler
	if gv := u.r.access.GroupVersion; !gv.Empty() {
		fields = managedfields.NewScaleHandler(m.GetManagedFields(), gv,
			managedfields.ResourcePathMappings{gv.String(): fieldpath.MakePathOrDie("spec", "replicas")})
		if oldScale.ManagedFields, err = fields.ToSubresource(); err != nil {
			return nil, err
		}
	}
	in, err := u.inner.UpdatedObject(ctx, oldScale)
	if err != nil {
		return nil, err
	}
	scale, ok := in.(*autoscalingv1.Scale)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("expected input object type to be Scale, but %T", in))
	}
	if scale.Spec.Replicas < 0 {
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: autoscalingv1.GroupName, Kind: "Scale"}, scale.Name,
			field.ErrorList{field.Invalid(field.NewPath("spec", "replicas"), scale.Spec.Replicas, "must be greater than or equal to 0")})
	}
	if u.updateValidation != nil {
		if err := u.updateValidation(ctx, scale, oldScale); err != nil {
			return nil, err
		}
	}
	if scale.ResourceVersion != "" {
		m.SetResourceVersion(scale.ResourceVersion) // a stale Scale conflicts
	}
	if fields != nil {
		entries, err := fields.ToParent(scale.ManagedFields)
		if err != nil {
			return nil, err
		}
		m.SetManagedFields(entries)
	}
	u.r.access.SetReplicas(obj, scale.Spec.Replicas)
	return obj, nil
}

// AddScale registers autoscaling/v1 Scale, external and internal, which
// every scale subresource speaks. Idempotent.
func AddScale(scheme *runtime.Scheme) {
	gv := autoscalingv1.SchemeGroupVersion
	if scheme.Recognizes(gv.WithKind("Scale")) {
		return
	}
	scheme.AddKnownTypes(gv, &autoscalingv1.Scale{})
	scheme.AddKnownTypeWithName(schema.GroupVersion{Group: gv.Group, Version: runtime.APIVersionInternal}.WithKind("Scale"), &autoscalingv1.Scale{})
	metav1.AddToGroupVersion(scheme, gv)
}
