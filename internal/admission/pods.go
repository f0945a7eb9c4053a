// Package admission holds the admission plugins kube-apiserver enables by
// default that kubeembed writes itself, because their upstream code lives in
// k8s.io/kubernetes: for pods, ServiceAccount, Priority and
// DefaultTolerationSeconds; LimitRanger; for nodes and volumes, see the
// providers.
package admission

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/storage/names"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	schedulinglisters "k8s.io/client-go/listers/scheduling/v1"
)

// Pods mutates new pods as kube-apiserver's default admission chain does:
//
//   - ServiceAccount: the service account defaults to "default" and must
//     exist (403 otherwise); its image pull secrets are copied; unless
//     automounting is off, a projected kube-api-access-xxxxx volume (token,
//     kube-root-ca.crt, namespace) is added and mounted read-only at
//     /var/run/secrets/kubernetes.io/serviceaccount in every container.
//   - Priority: spec.priority and preemptionPolicy come from the pod's
//     PriorityClass, or from the global default class, or are 0 and
//     PreemptLowerPriority; an unknown class, or a priority given that does
//     not match the class, is refused (403).
//   - DefaultTolerationSeconds: pods tolerate not-ready and unreachable
//     nodes for 300 s unless they say otherwise.
//
// Lookups read the listers when they are fresh and go to the server itself
// otherwise (Fresh), so an object created just before is always seen.
type Pods struct {
	*admission.Handler
	client kubernetes.Interface
	// serviceAccount is the ServiceAccount plugin's part.
	serviceAccount bool
	listers        PodListers
}

// PodListers are the listers Pods reads while they are fresh; zero ones
// leave every lookup to the server.
type PodListers struct {
	ServiceAccounts Fresh[corelisters.ServiceAccountLister]
	PriorityClasses Fresh[schedulinglisters.PriorityClassLister]
}

var _ admission.MutationInterface = (*Pods)(nil)

// NewPods returns the plugin; client reads service accounts and priority
// classes where listers are not fresh. Without serviceAccount the
// ServiceAccount plugin's part is off, as kube-apiserver's
// --disable-admission-plugins=ServiceAccount.
func NewPods(client kubernetes.Interface, serviceAccount bool, listers PodListers) *Pods {
	return &Pods{Handler: admission.NewHandler(admission.Create, admission.Update), client: client,
		serviceAccount: serviceAccount, listers: listers}
}

// The service account token volume, as the ServiceAccount plugin adds it.
const (
	tokenVolumePrefix = "kube-api-access-"
	tokenMountPath    = "/var/run/secrets/kubernetes.io/serviceaccount"
	tokenExpiration   = int64(3607) // an hour, plus kube-apiserver's 7 s of jitter
	rootCAConfigMap   = "kube-root-ca.crt"
	defaultTolerance  = int64(300)
)

// Admit implements admission.MutationInterface.
func (p *Pods) Admit(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetResource().GroupResource() != corev1.Resource("pods") || a.GetSubresource() != "" {
		return nil
	}
	pod, ok := a.GetObject().(*corev1.Pod)
	if !ok {
		return apierrors.NewBadRequest("resource was marked with kind Pod but was unable to be converted")
	}
	if a.GetOperation() == admission.Update {
		return admitUpdate(a, pod)
	}
	if _, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return nil
	}
	if p.serviceAccount {
		if err := p.admitServiceAccount(ctx, a, pod); err != nil {
			return err
		}
	}
	if err := p.priority(ctx, a, pod); err != nil {
		return err
	}
	defaultTolerations(pod)
	return nil
}

// admitUpdate does what the Priority and DefaultTolerationSeconds plugins
// do to an update of a pod: the priority and preemption policy set at
// create are kept when the update leaves them out, and the default
// tolerations are added again. (Validation then refuses what an update may
// not change, and its message's diff shows none of these.)
func admitUpdate(a admission.Attributes, pod *corev1.Pod) error {
	old, ok := a.GetOldObject().(*corev1.Pod)
	if !ok {
		return apierrors.NewBadRequest("resource was marked with kind Pod but was unable to be converted")
	}
	if pod.Spec.Priority == nil {
		pod.Spec.Priority = old.Spec.Priority
	}
	if pod.Spec.PreemptionPolicy == nil {
		pod.Spec.PreemptionPolicy = old.Spec.PreemptionPolicy
	}
	defaultTolerations(pod)
	return nil
}

func (p *Pods) admitServiceAccount(ctx context.Context, a admission.Attributes, pod *corev1.Pod) error {
	if pod.Spec.ServiceAccountName == "" {
		pod.Spec.ServiceAccountName = "default"
	}
	pod.Spec.DeprecatedServiceAccount = pod.Spec.ServiceAccountName
	sa, err := p.serviceAccountOf(ctx, a.GetNamespace(), pod.Spec.ServiceAccountName)
	if apierrors.IsNotFound(err) {
		err = apierrors.NewNotFound(corev1.Resource("serviceaccount"), pod.Spec.ServiceAccountName)
	}
	if err != nil {
		return admission.NewForbidden(a, fmt.Errorf("error looking up service account %s/%s: %w", a.GetNamespace(), pod.Spec.ServiceAccountName, err))
	}
	if len(pod.Spec.ImagePullSecrets) == 0 && len(sa.ImagePullSecrets) > 0 {
		pod.Spec.ImagePullSecrets = slices.Clone(sa.ImagePullSecrets)
	}
	automount := true
	switch {
	case pod.Spec.AutomountServiceAccountToken != nil:
		automount = *pod.Spec.AutomountServiceAccountToken
	case sa.AutomountServiceAccountToken != nil:
		automount = *sa.AutomountServiceAccountToken
	}
	if automount {
		mountToken(pod)
	}
	return nil
}

// mountToken adds the token volume (unless the pod has one) and mounts it in
// every init and regular container that has nothing at the mount path.
func mountToken(pod *corev1.Pod) {
	volume := ""
	for _, v := range pod.Spec.Volumes {
		if strings.HasPrefix(v.Name, tokenVolumePrefix) {
			volume = v.Name
			break
		}
	}
	hasVolume := volume != ""
	if !hasVolume {
		taken := map[string]bool{}
		for _, v := range pod.Spec.Volumes {
			taken[v.Name] = true
		}
		for volume == "" || taken[volume] {
			volume = names.SimpleNameGenerator.GenerateName(tokenVolumePrefix)
		}
	}
	mounted := false
	mount := func(cs []corev1.Container) {
		for i := range cs {
			if slices.ContainsFunc(cs[i].VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == tokenMountPath }) {
				continue
			}
			cs[i].VolumeMounts = append(cs[i].VolumeMounts, corev1.VolumeMount{Name: volume, ReadOnly: true, MountPath: tokenMountPath})
			mounted = true
		}
	}
	mount(pod.Spec.InitContainers)
	mount(pod.Spec.Containers)
	if hasVolume || !mounted {
		return
	}
	expiration, mode := tokenExpiration, int32(0o644)
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: volume, VolumeSource: corev1.VolumeSource{
		Projected: &corev1.ProjectedVolumeSource{DefaultMode: &mode, Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: &expiration, Path: "token"}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: rootCAConfigMap},
				Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace",
				FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
		}},
	}})
}

func (p *Pods) priority(ctx context.Context, a admission.Attributes, pod *corev1.Pod) error {
	var (
		value  int32
		policy = corev1.PreemptLowerPriority
	)
	if pod.Spec.PriorityClassName == "" {
		def, err := p.globalDefault(ctx)
		if err != nil {
			return apierrors.NewInternalError(fmt.Errorf("failed to get default priority class: %w", err))
		}
		if def != nil {
			pod.Spec.PriorityClassName, value = def.Name, def.Value
			if def.PreemptionPolicy != nil {
				policy = *def.PreemptionPolicy
			}
		}
	} else {
		pc, err := p.priorityClass(ctx, pod.Spec.PriorityClassName)
		switch {
		case apierrors.IsNotFound(err):
			return admission.NewForbidden(a, fmt.Errorf("no PriorityClass with name %v was found", pod.Spec.PriorityClassName))
		case err != nil:
			return apierrors.NewInternalError(fmt.Errorf("failed to get PriorityClass with name %s: %w", pod.Spec.PriorityClassName, err))
		}
		value = pc.Value
		if pc.PreemptionPolicy != nil {
			policy = *pc.PreemptionPolicy
		}
	}
	if pod.Spec.Priority != nil && *pod.Spec.Priority != value {
		return admission.NewForbidden(a, fmt.Errorf("the integer value of priority (%d) must not be provided in pod spec; priority admission controller computed %d from the given PriorityClass name", *pod.Spec.Priority, value))
	}
	if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy != policy {
		return admission.NewForbidden(a, fmt.Errorf("the string value of PreemptionPolicy (%s) must not be provided in pod spec; priority admission controller computed %s from the given PriorityClass name", *pod.Spec.PreemptionPolicy, policy))
	}
	pod.Spec.Priority, pod.Spec.PreemptionPolicy = &value, &policy
	return nil
}

// globalDefault is the global default PriorityClass with the lowest value,
// or nil.
func (p *Pods) globalDefault(ctx context.Context) (*schedulingv1.PriorityClass, error) {
	var classes []*schedulingv1.PriorityClass
	if lister, ok := p.listers.PriorityClasses.get(); ok {
		var err error
		if classes, err = lister.List(labels.Everything()); err != nil {
			return nil, err
		}
	} else {
		list, err := p.client.SchedulingV1().PriorityClasses().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for i := range list.Items {
			classes = append(classes, &list.Items[i])
		}
	}
	var def *schedulingv1.PriorityClass
	for _, pc := range classes {
		if pc.GlobalDefault && (def == nil || pc.Value < def.Value || pc.Value == def.Value && pc.Name < def.Name) {
			def = pc
		}
	}
	return def, nil
}

// serviceAccountOf and priorityClass read the listers' objects, which are
// shared: the plugin only reads them.
func (p *Pods) serviceAccountOf(ctx context.Context, ns, name string) (*corev1.ServiceAccount, error) {
	if lister, ok := p.listers.ServiceAccounts.get(); ok {
		return lister.ServiceAccounts(ns).Get(name)
	}
	return p.client.CoreV1().ServiceAccounts(ns).Get(ctx, name, metav1.GetOptions{})
}

func (p *Pods) priorityClass(ctx context.Context, name string) (*schedulingv1.PriorityClass, error) {
	if lister, ok := p.listers.PriorityClasses.get(); ok {
		return lister.Get(name)
	}
	return p.client.SchedulingV1().PriorityClasses().Get(ctx, name, metav1.GetOptions{})
}

func defaultTolerations(pod *corev1.Pod) {
	tolerates := func(key string) bool {
		return slices.ContainsFunc(pod.Spec.Tolerations, func(t corev1.Toleration) bool {
			return (t.Key == key || t.Key == "") && (t.Effect == corev1.TaintEffectNoExecute || t.Effect == "")
		})
	}
	for _, key := range []string{corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable} {
		if !tolerates(key) {
			seconds := defaultTolerance
			pod.Spec.Tolerations = append(pod.Spec.Tolerations, corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists,
				Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &seconds})
		}
	}
}
