package kubelet

// What the kubelet reads of ConfigMaps and Secrets for a pod (kubelet
// v1.37.2): its configMap, secret and projected volumes are set up before
// its sandbox starts, so one that cannot be (its object or a key it names
// is missing, and it is not optional) holds the pod Pending with its
// containers ContainerCreating and FailedMount events, retried on the
// volume manager's back-off; a container's environment (env valueFrom,
// envFrom) is read as the container is created, so a missing object or key
// leaves that container waiting with CreateContainerConfigError (and a
// Failed event), tried again on the pod worker's back-off.

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"
)

const (
	// mountBackOffInitial and mountBackOffMax are the volume manager's
	// exponential back-off for an operation that failed
	// (nestedpendingoperations).
	mountBackOffInitial = 500 * time.Millisecond
	mountBackOffMax     = 2*time.Minute + 2*time.Second
	// workerBackOff is how long the pod worker waits to sync a pod again
	// after its sync failed (a container's config could not be made);
	// plegRelist is how often the runtime's state is relisted, which
	// syncs a pod whose sandbox or containers changed.
	workerBackOff = 10 * time.Second
	plegRelist    = time.Second
	// rootCAConfigMap is the ConfigMap of the service account volume
	// kube-apiserver's admission adds: always taken as there, so that a
	// server whose controllers leave out its publisher runs pods.
	rootCAConfigMap = "kube-root-ca.crt"
)

// configSource reads the ConfigMaps and Secrets pods refer to: from the
// informers' caches, and, for one a cache does not have, from the server
// (the cache may not have an object created just before the pod; the
// kubelet's watch-based managers wait for each object's first list).
type configSource struct {
	configMaps corev1listers.ConfigMapLister
	secrets    corev1listers.SecretLister
	client     kubernetes.Interface
	synced     func() bool
}

// configMap is the namespace's ConfigMap, or the error the kubelet's
// ConfigMap manager gives (`configmap "x" not found`).
func (s configSource) configMap(ns, name string) (*corev1.ConfigMap, error) {
	cm, err := s.configMaps.ConfigMaps(ns).Get(name)
	if apierrors.IsNotFound(err) {
		cm, err = readFresh(func(ctx context.Context) (*corev1.ConfigMap, error) {
			return s.client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		})
	}
	if apierrors.IsNotFound(err) {
		return nil, apierrors.NewNotFound(corev1.Resource("configmap"), name)
	}
	return cm, err
}

// secret is the namespace's Secret, or the error the kubelet's Secret
// manager gives (`secret "x" not found`).
func (s configSource) secret(ns, name string) (*corev1.Secret, error) {
	sec, err := s.secrets.Secrets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		sec, err = readFresh(func(ctx context.Context) (*corev1.Secret, error) {
			return s.client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		})
	}
	if apierrors.IsNotFound(err) {
		return nil, apierrors.NewNotFound(corev1.Resource("secret"), name)
	}
	return sec, err
}

// readFresh reads an object from the server, within a bound (the caller
// holds the kubelet's lock; the server is in the process).
func readFresh[T any](get func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return get(ctx)
}

// mountErrors are the FailedMount messages of the pod's volumes that
// cannot be set up now, in the pod's order.
func (s configSource) mountErrors(pod *corev1.Pod) []string {
	var out []string
	for _, v := range pod.Spec.Volumes {
		var err error
		switch {
		case v.ConfigMap != nil:
			err = s.configMapPayload(pod.Namespace, v.ConfigMap.Name, v.ConfigMap.Items, v.ConfigMap.Optional)
		case v.Secret != nil:
			err = s.secretPayload(pod.Namespace, v.Secret.SecretName, v.Secret.Items, v.Secret.Optional)
		case v.Projected != nil:
			err = s.projectedPayload(pod.Namespace, v.Projected)
		}
		if err != nil {
			out = append(out, fmt.Sprintf("MountVolume.SetUp failed for volume %q : %v", v.Name, err))
		}
	}
	return out
}

// configMapPayload is the configMap volume plugin's error for the
// ConfigMap and the keys a volume names, or nil.
func (s configSource) configMapPayload(ns, name string, items []corev1.KeyToPath, optional *bool) error {
	opt := optional != nil && *optional
	cm, err := s.configMap(ns, name)
	if err != nil {
		if apierrors.IsNotFound(err) && opt {
			return nil
		}
		return err
	}
	for _, item := range items {
		_, inData := cm.Data[item.Key]
		_, inBinary := cm.BinaryData[item.Key]
		if !inData && !inBinary && !opt {
			return fmt.Errorf("configmap references non-existent config key: %s", item.Key)
		}
	}
	return nil
}

// secretPayload is the secret volume plugin's error for the Secret and
// the keys a volume names, or nil.
func (s configSource) secretPayload(ns, name string, items []corev1.KeyToPath, optional *bool) error {
	opt := optional != nil && *optional
	sec, err := s.secret(ns, name)
	if err != nil {
		if apierrors.IsNotFound(err) && opt {
			return nil
		}
		return err
	}
	for _, item := range items {
		if _, ok := sec.Data[item.Key]; !ok && !opt {
			return fmt.Errorf("references non-existent secret key: %s", item.Key)
		}
	}
	return nil
}

// projectedPayload is the projected volume plugin's error: each of its
// ConfigMap and Secret sources' (aggregated), or nil.
func (s configSource) projectedPayload(ns string, p *corev1.ProjectedVolumeSource) error {
	var errs []error
	for _, src := range p.Sources {
		var err error
		switch {
		case src.ConfigMap != nil && src.ConfigMap.Name != rootCAConfigMap:
			err = s.configMapPayload(ns, src.ConfigMap.Name, src.ConfigMap.Items, src.ConfigMap.Optional)
		case src.Secret != nil:
			err = s.secretPayload(ns, src.Secret.Name, src.Secret.Items, src.Secret.Optional)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.NewAggregate(errs)
}

// envError is the error that makes the container's configuration fail
// (makeEnvironmentVariables: envFrom first, then env), or "".
func (s configSource) envError(pod *corev1.Pod, c *corev1.Container) string {
	ns := pod.Namespace
	for _, from := range c.EnvFrom {
		var err error
		switch {
		case from.ConfigMapRef != nil:
			_, err = s.configMap(ns, from.ConfigMapRef.Name)
			err = unlessOptional(err, from.ConfigMapRef.Optional)
		case from.SecretRef != nil:
			_, err = s.secret(ns, from.SecretRef.Name)
			err = unlessOptional(err, from.SecretRef.Optional)
		}
		if err != nil {
			return err.Error()
		}
	}
	for _, env := range c.Env {
		if env.Value != "" || env.ValueFrom == nil {
			continue
		}
		if msg := s.keyError(ns, env.ValueFrom); msg != "" {
			return msg
		}
	}
	return ""
}

// keyError is the error of one env var's ConfigMap or Secret key, or "".
func (s configSource) keyError(ns string, from *corev1.EnvVarSource) string {
	switch {
	case from.ConfigMapKeyRef != nil:
		ref := from.ConfigMapKeyRef
		cm, err := s.configMap(ns, ref.Name)
		if err = unlessOptional(err, ref.Optional); err != nil || cm == nil {
			return errorText(err)
		}
		if _, ok := cm.Data[ref.Key]; !ok && (ref.Optional == nil || !*ref.Optional) {
			return fmt.Sprintf("couldn't find key %v in ConfigMap %v/%v", ref.Key, ns, ref.Name)
		}
	case from.SecretKeyRef != nil:
		ref := from.SecretKeyRef
		sec, err := s.secret(ns, ref.Name)
		if err = unlessOptional(err, ref.Optional); err != nil || sec == nil {
			return errorText(err)
		}
		if _, ok := sec.Data[ref.Key]; !ok && (ref.Optional == nil || !*ref.Optional) {
			return fmt.Sprintf("couldn't find key %v in Secret %v/%v", ref.Key, ns, ref.Name)
		}
	}
	return ""
}

// errorText is err's text, or "" for nil.
func errorText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// unlessOptional is err, but nil for an object not found that is optional.
func unlessOptional(err error, optional *bool) error {
	if apierrors.IsNotFound(err) && optional != nil && *optional {
		return nil
	}
	return err
}

// sandboxDue: the pod's sandbox is to start at its next sync (its
// volumes are not waiting for a retry; it is not ending).
func (r *podRuntime) sandboxDue(pod *corev1.Pod) bool {
	return !r.sandbox && r.mountRetryAt.IsZero() && !r.pastDeadline && r.stopping.IsZero() && !terminal(pod)
}

// mount sets up the pod's volumes when the volume manager's back-off lets
// it try, and reports whether they are; a failed try's events are kept in
// r for the next status. Called with k.mu held.
func (k *Kubelet) mount(pod *corev1.Pod, r *podRuntime, now time.Time) bool {
	if now.Before(r.mountRetryAt) {
		return false
	}
	if !k.config.synced() {
		r.mountRetryAt = now.Add(100 * time.Millisecond)
		return false
	}
	failed := k.config.mountErrors(pod)
	if len(failed) == 0 {
		r.mountRetryAt = time.Time{}
		return true
	}
	backOff := mountBackOffInitial << min(r.mountFailures, 10)
	r.mountFailures++
	r.mountRetryAt = now.Add(min(backOff, mountBackOffMax))
	for _, msg := range failed {
		r.podEvents = append(r.podEvents, event{corev1.EventTypeWarning, "FailedMount", msg})
	}
	return false
}

// plans are what a container's start reads: the test's outcomes, and
// the ConfigMaps and Secrets of its environment.
type plans struct {
	*outcomes
	config configSource
}

// configError is why the container's configuration cannot be made now, or
// "" (planner).
func (p plans) configError(pod *corev1.Pod, c *container) string {
	return p.config.envError(pod, c.spec)
}
