package podspec

import (
	"iter"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// DropDisabledFields drops what a pod spec sets of features off in v1.37
// unless old (nil on create) uses them, as kube-apiserver's
// DropDisabledPodFields does: volume mounts' bindMountOptions
// (VolumeBindMountOptions, alpha). Kept, a field would also make the pod
// need a feature no node declares, so it would never be scheduled.
func DropDisabledFields(s, old *corev1.PodSpec) {
	if old != nil && bindMountOptionsInUse(old) {
		return
	}
	for m := range volumeMounts(s) {
		m.BindMountOptions = nil
	}
}

func bindMountOptionsInUse(s *corev1.PodSpec) bool {
	for m := range volumeMounts(s) {
		if len(m.BindMountOptions) > 0 {
			return true
		}
	}
	return false
}

// volumeMounts yields the volume mounts of every container of s: init,
// regular and ephemeral.
func volumeMounts(s *corev1.PodSpec) iter.Seq[*corev1.VolumeMount] {
	return func(yield func(*corev1.VolumeMount) bool) {
		lists := [][]corev1.VolumeMount{}
		for i := range s.InitContainers {
			lists = append(lists, s.InitContainers[i].VolumeMounts)
		}
		for i := range s.Containers {
			lists = append(lists, s.Containers[i].VolumeMounts)
		}
		for i := range s.EphemeralContainers {
			lists = append(lists, s.EphemeralContainers[i].VolumeMounts)
		}
		for _, mounts := range lists {
			for j := range mounts {
				if !yield(&mounts[j]) {
					return
				}
			}
		}
	}
}

// validateHostUsers: a pod in a user namespace (hostUsers false) shares no
// other host namespace and has no volume devices, as kube-apiserver v1.37
// requires (UserNamespacesHostNetworkSupport off).
func validateHostUsers(s *corev1.PodSpec, p *field.Path) field.ErrorList {
	if s.HostUsers == nil || *s.HostUsers {
		return nil
	}
	var errs field.ErrorList
	for _, shared := range []struct {
		on   bool
		name string
	}{{s.HostNetwork, "hostNetwork"}, {s.HostPID, "HostPID"}, {s.HostIPC, "HostIPC"}} {
		if shared.on {
			errs = append(errs, field.Forbidden(p.Child(shared.name), "when `hostUsers` is false"))
		}
	}
	visit := func(kind string, i int, devices []corev1.VolumeDevice) {
		if len(devices) > 0 {
			errs = append(errs, field.Forbidden(p.Child(kind).Index(i).Child("volumeDevices"), "when `hostUsers` is false"))
		}
	}
	for i, c := range s.InitContainers {
		visit("initContainers", i, c.VolumeDevices)
	}
	for i, c := range s.Containers {
		visit("containers", i, c.VolumeDevices)
	}
	for i, c := range s.EphemeralContainers {
		visit("ephemeralContainers", i, c.VolumeDevices)
	}
	return errs
}
