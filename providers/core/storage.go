package core

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/kubeembed/apiserver/providers"
	"github.com/kubeembed/apiserver/providers/registry"
)

func defaultPVC(c *corev1.PersistentVolumeClaim) {
	if c.Spec.VolumeMode == nil {
		fs := corev1.PersistentVolumeFilesystem
		c.Spec.VolumeMode = &fs
	}
}

var accessModes = []string{string(corev1.ReadWriteOnce), string(corev1.ReadOnlyMany), string(corev1.ReadWriteMany), string(corev1.ReadWriteOncePod)}

func validatePVCSpec(s *corev1.PersistentVolumeClaimSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(s.AccessModes) == 0 {
		errs = append(errs, field.Required(p.Child("accessModes"), "at least 1 access mode is required"))
	}
	for _, m := range s.AccessModes {
		if !slices.Contains(accessModes, string(m)) {
			errs = append(errs, field.NotSupported(p.Child("accessModes"), m, accessModes))
		}
	}
	if _, ok := s.Resources.Requests[corev1.ResourceStorage]; !ok && s.DataSource == nil && s.DataSourceRef == nil {
		errs = append(errs, field.Required(p.Child("resources").Key(string(corev1.ResourceStorage)), ""))
	} else if q, ok := s.Resources.Requests[corev1.ResourceStorage]; ok && q.Sign() <= 0 {
		errs = append(errs, field.Invalid(p.Child("resources").Key(string(corev1.ResourceStorage)), q.String(), "must be greater than zero"))
	}
	if m := s.VolumeMode; m != nil && *m != corev1.PersistentVolumeFilesystem && *m != corev1.PersistentVolumeBlock {
		errs = append(errs, field.NotSupported(p.Child("volumeMode"), *m, []string{string(corev1.PersistentVolumeBlock), string(corev1.PersistentVolumeFilesystem)}))
	}
	return errs
}

// pvcStorage serves persistentvolumeclaims: a claim's spec is immutable
// after creation but for its storage request (expansion), volume binding and
// attributes class, as kube-apiserver allows.
func pvcStorage(ctx providers.Config) (map[string]rest.Storage, error) {
	w := registry.Workload[*corev1.PersistentVolumeClaim]{
		GroupVersion: corev1.SchemeGroupVersion,
		Resource:     "persistentvolumeclaims", Singular: "persistentvolumeclaim", ShortNames: []string{"pvc"},
		NoGeneration: true, ReturnDeleted: true,
		NewObj:  func() runtime.Object { return &corev1.PersistentVolumeClaim{} },
		NewList: func() runtime.Object { return &corev1.PersistentVolumeClaimList{} },
		Meta:    func(c *corev1.PersistentVolumeClaim) *metav1.ObjectMeta { return &c.ObjectMeta },
		Spec:    func(c *corev1.PersistentVolumeClaim) any { return c.Spec },
		ResetStatus: func(c, old *corev1.PersistentVolumeClaim) {
			c.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}
			if old != nil {
				c.Status = old.Status
			}
		},
		ResetSpec: func(c, old *corev1.PersistentVolumeClaim) { c.Spec = old.Spec },
		PrepareCreate: func(c *corev1.PersistentVolumeClaim) {
			addFinalizer(&c.ObjectMeta, "kubernetes.io/pvc-protection")
		},
		Validate: func(c *corev1.PersistentVolumeClaim) field.ErrorList {
			return validatePVCSpec(&c.Spec, field.NewPath("spec"))
		},
		ValidateUpdate: func(c, old *corev1.PersistentVolumeClaim) field.ErrorList {
			a, b := c.Spec.DeepCopy(), old.Spec.DeepCopy()
			a.Resources.Requests, b.Resources.Requests = nil, nil
			a.VolumeAttributesClassName, b.VolumeAttributesClassName = nil, nil
			if b.VolumeName == "" {
				a.VolumeName = ""
			}
			if !apiequality.Semantic.DeepEqual(a, b) {
				return field.ErrorList{field.Forbidden(field.NewPath("spec"), "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims")}
			}
			return nil
		},
		Columns: []registry.Column{
			registry.ColumnOf("Status", "string", corev1.PersistentVolumeClaimStatus{}.SwaggerDoc()["phase"], 0, func(c *corev1.PersistentVolumeClaim) any { return string(c.Status.Phase) }),
			registry.ColumnOf("Volume", "string", corev1.PersistentVolumeClaimSpec{}.SwaggerDoc()["volumeName"], 0, func(c *corev1.PersistentVolumeClaim) any { return c.Spec.VolumeName }),
			registry.ColumnOf("Capacity", "string", corev1.PersistentVolumeClaimStatus{}.SwaggerDoc()["capacity"], 0, func(c *corev1.PersistentVolumeClaim) any {
				if q, ok := c.Status.Capacity[corev1.ResourceStorage]; ok {
					return q.String()
				}
				return ""
			}),
			registry.ColumnOf("Access Modes", "string", corev1.PersistentVolumeClaimStatus{}.SwaggerDoc()["accessModes"], 0, func(c *corev1.PersistentVolumeClaim) any {
				return accessModesString(c.Status.AccessModes)
			}),
			registry.ColumnOf("StorageClass", "string", "StorageClass of the pvc", 0, func(c *corev1.PersistentVolumeClaim) any {
				if c.Spec.StorageClassName == nil {
					return ""
				}
				return *c.Spec.StorageClassName
			}),
			registry.ColumnOf("VolumeAttributesClass", "string", "VolumeAttributesClass of the pvc", 0, func(c *corev1.PersistentVolumeClaim) any {
				if c.Spec.VolumeAttributesClassName == nil {
					return "<unset>"
				}
				return *c.Spec.VolumeAttributesClassName
			}),
			registry.AgeColumn(),
			registry.ColumnOf("VolumeMode", "string", corev1.PersistentVolumeClaimSpec{}.SwaggerDoc()["volumeMode"], 1, func(c *corev1.PersistentVolumeClaim) any {
				if c.Spec.VolumeMode == nil {
					return "<unset>"
				}
				return string(*c.Spec.VolumeMode)
			}),
		},
	}
	return w.Storage(ctx)
}

func accessModesString(modes []corev1.PersistentVolumeAccessMode) string {
	short := map[corev1.PersistentVolumeAccessMode]string{corev1.ReadWriteOnce: "RWO", corev1.ReadOnlyMany: "ROX", corev1.ReadWriteMany: "RWX", corev1.ReadWriteOncePod: "RWOP"}
	out := ""
	for i, m := range modes {
		if i > 0 {
			out += ","
		}
		out += short[m]
	}
	return out
}

// nodeStorage serves nodes (cluster-scoped) with status.
func nodeStorage(ctx providers.Config) (map[string]rest.Storage, error) {
	st := strategy(ctx.Scheme, false)
	st.ResetFields = registry.ResetStatus(corev1.SchemeGroupVersion)
	st.PrepareCreate = func(_ context.Context, obj runtime.Object) {
		n := obj.(*corev1.Node)
		n.Status = corev1.NodeStatus{}
		// The TaintNodesByCondition admission plugin: a new node is not
		// ready until its kubelet says so.
		notReady := corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}
		if !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&notReady) }) {
			n.Spec.Taints = append(n.Spec.Taints, notReady)
		}
	}
	st.PrepareUpdate = func(_ context.Context, obj, old runtime.Object) {
		obj.(*corev1.Node).Status = old.(*corev1.Node).Status
	}
	st.ValidateCreate = func(_ context.Context, obj runtime.Object) field.ErrorList {
		n := obj.(*corev1.Node)
		return validateMeta(&n.ObjectMeta, false, apivalidation.NameIsDNSSubdomain)
	}
	st.ValidateOnUpdate = func(_ context.Context, obj, old runtime.Object) field.ErrorList {
		n, o := obj.(*corev1.Node), old.(*corev1.Node)
		var errs field.ErrorList
		if o.Spec.PodCIDR != "" {
			errs = append(errs, apivalidation.ValidateImmutableField(n.Spec.PodCIDR, o.Spec.PodCIDR, field.NewPath("spec", "podCIDR"))...)
		}
		if o.Spec.ProviderID != "" {
			errs = append(errs, apivalidation.ValidateImmutableField(n.Spec.ProviderID, o.Spec.ProviderID, field.NewPath("spec", "providerID"))...)
		}
		return errs
	}
	store, err := registry.NewStore(ctx, registry.StoreConfig{
		Resource: corev1.Resource("nodes"), Singular: "node",
		NewFunc:  func() runtime.Object { return &corev1.Node{} },
		NewList:  func() runtime.Object { return &corev1.NodeList{} },
		Strategy: st, ShortNames: []string{"no"},
		Table: registry.Table(registry.NameColumn(),
			registry.ColumnOf("Status", "string", "The status of the node", 0, func(n *corev1.Node) any { return nodeStatus(n) }),
			registry.ColumnOf("Roles", "string", "The roles of the node", 0, func(n *corev1.Node) any { return "<none>" }),
			registry.AgeColumn(),
			registry.ColumnOf("Version", "string", "Kubelet Version reported by the node.", 0, func(n *corev1.Node) any { return n.Status.NodeInfo.KubeletVersion }),
			nodeAddress("Internal-IP", corev1.NodeInternalIP),
			nodeAddress("External-IP", corev1.NodeExternalIP),
			registry.ColumnOf("OS-Image", "string", corev1.NodeSystemInfo{}.SwaggerDoc()["osImage"], 1, func(n *corev1.Node) any { return orUnknown(n.Status.NodeInfo.OSImage) }),
			registry.ColumnOf("Kernel-Version", "string", corev1.NodeSystemInfo{}.SwaggerDoc()["kernelVersion"], 1, func(n *corev1.Node) any { return orUnknown(n.Status.NodeInfo.KernelVersion) }),
			registry.ColumnOf("Container-Runtime", "string", corev1.NodeSystemInfo{}.SwaggerDoc()["containerRuntimeVersion"], 1, func(n *corev1.Node) any {
				return orUnknown(n.Status.NodeInfo.ContainerRuntimeVersion)
			}),
		),
		AttrFunc: registry.AttrFunc(false, func(n *corev1.Node) fields.Set {
			return fields.Set{"spec.unschedulable": boolString(n.Spec.Unschedulable)}
		}),
	})
	if err != nil {
		return nil, err
	}
	status := strategy(ctx.Scheme, false)
	status.ResetFields = registry.ResetSpec(corev1.SchemeGroupVersion)
	status.PrepareUpdate = func(_ context.Context, obj, old runtime.Object) { obj.(*corev1.Node).Spec = old.(*corev1.Node).Spec }
	return map[string]rest.Storage{"nodes": store, "nodes/status": registry.Subresource(store, status, status)}, nil
}

func nodeStatus(n *corev1.Node) string {
	status := "Unknown"
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status == corev1.ConditionTrue {
				status = "Ready"
			} else {
				status = "NotReady"
			}
		}
	}
	if n.Spec.Unschedulable {
		status += ",SchedulingDisabled"
	}
	return status
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// pvStorage serves persistentvolumes (cluster-scoped) with /status. A new
// volume is Pending since its creation; the phase's transition time moves
// when /status changes the phase, as kube-apiserver records it.
func pvStorage(ctx providers.Config) (map[string]rest.Storage, error) {
	doc := corev1.PersistentVolumeSpec{}.SwaggerDoc()
	w := registry.Workload[*corev1.PersistentVolume]{
		GroupVersion: corev1.SchemeGroupVersion, Cluster: true,
		Resource: "persistentvolumes", Singular: "persistentvolume", ShortNames: []string{"pv"},
		NoGeneration: true, ReturnDeleted: true,
		NewObj:  func() runtime.Object { return &corev1.PersistentVolume{} },
		NewList: func() runtime.Object { return &corev1.PersistentVolumeList{} },
		Meta:    func(p *corev1.PersistentVolume) *metav1.ObjectMeta { return &p.ObjectMeta },
		Spec:    func(p *corev1.PersistentVolume) any { return p.Spec },
		ResetStatus: func(p, old *corev1.PersistentVolume) {
			if old != nil {
				p.Status = old.Status
				return
			}
			now := metav1.Now()
			p.Status = corev1.PersistentVolumeStatus{Phase: corev1.VolumePending, LastPhaseTransitionTime: &now}
		},
		ResetSpec: func(p, old *corev1.PersistentVolume) { p.Spec = old.Spec },
		PrepareCreate: func(p *corev1.PersistentVolume) {
			addFinalizer(&p.ObjectMeta, "kubernetes.io/pv-protection")
		},
		PrepareStatusUpdate: func(p, old *corev1.PersistentVolume) {
			if p.Status.Phase != old.Status.Phase {
				now := metav1.Now()
				p.Status.LastPhaseTransitionTime = &now
			}
		},
		Validate: func(p *corev1.PersistentVolume) field.ErrorList {
			var errs field.ErrorList
			sp := field.NewPath("spec")
			if len(p.Spec.AccessModes) == 0 {
				errs = append(errs, field.Required(sp.Child("accessModes"), ""))
			}
			if _, ok := p.Spec.Capacity[corev1.ResourceStorage]; !ok {
				errs = append(errs, field.Required(sp.Child("capacity"), ""))
			}
			return errs
		},
		Columns: []registry.Column{
			registry.ColumnOf("Capacity", "string", doc["capacity"], 0, func(p *corev1.PersistentVolume) any {
				q := p.Spec.Capacity[corev1.ResourceStorage]
				return q.String()
			}),
			registry.ColumnOf("Access Modes", "string", doc["accessModes"], 0, func(p *corev1.PersistentVolume) any { return accessModesString(p.Spec.AccessModes) }),
			registry.ColumnOf("Reclaim Policy", "string", doc["persistentVolumeReclaimPolicy"], 0, func(p *corev1.PersistentVolume) any {
				return string(p.Spec.PersistentVolumeReclaimPolicy)
			}),
			registry.ColumnOf("Status", "string", corev1.PersistentVolumeStatus{}.SwaggerDoc()["phase"], 0, func(p *corev1.PersistentVolume) any { return string(p.Status.Phase) }),
			registry.ColumnOf("Claim", "string", doc["claimRef"], 0, func(p *corev1.PersistentVolume) any {
				if c := p.Spec.ClaimRef; c != nil {
					return c.Namespace + "/" + c.Name
				}
				return ""
			}),
			registry.ColumnOf("StorageClass", "string", "StorageClass of the pv", 0, func(p *corev1.PersistentVolume) any { return p.Spec.StorageClassName }),
			registry.ColumnOf("VolumeAttributesClass", "string", "VolumeAttributesClass of the pv", 0, func(p *corev1.PersistentVolume) any {
				if p.Spec.VolumeAttributesClassName == nil {
					return "<unset>"
				}
				return *p.Spec.VolumeAttributesClassName
			}),
			registry.ColumnOf("Reason", "string", corev1.PersistentVolumeStatus{}.SwaggerDoc()["reason"], 0, func(p *corev1.PersistentVolume) any { return p.Status.Reason }),
			registry.AgeColumn(),
			registry.ColumnOf("VolumeMode", "string", doc["volumeMode"], 1, func(p *corev1.PersistentVolume) any {
				if p.Spec.VolumeMode == nil {
					return "<unset>"
				}
				return string(*p.Spec.VolumeMode)
			}),
		},
	}
	return w.Storage(ctx)
}

// addFinalizer adds f once. The StorageObjectInUseProtection admission
// plugin of kube-apiserver protects volumes and claims this way.
func addFinalizer(m *metav1.ObjectMeta, f string) {
	if !slices.Contains(m.Finalizers, f) {
		m.Finalizers = append(m.Finalizers, f)
	}
}

// nodeAddress is a wide column with the node's first address of a type.
func nodeAddress(name string, t corev1.NodeAddressType) registry.Column {
	return registry.ColumnOf(name, "string", corev1.NodeStatus{}.SwaggerDoc()["addresses"], 1, func(n *corev1.Node) any {
		for _, a := range n.Status.Addresses {
			if a.Type == t {
				return a.Address
			}
		}
		return "<none>"
	})
}

func orUnknown(s string) string {
	if s == "" {
		return "<unknown>"
	}
	return s
}
