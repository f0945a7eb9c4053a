package podspec

import (
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
	for _, list := range [][]corev1.Container{s.InitContainers, s.Containers} {
		for i := range list {
			for j := range list[i].VolumeMounts {
				list[i].VolumeMounts[j].BindMountOptions = nil
			}
		}
	}
	for i := range s.EphemeralContainers {
		for j := range s.EphemeralContainers[i].VolumeMounts {
			s.EphemeralContainers[i].VolumeMounts[j].BindMountOptions = nil
		}
	}
}

func bindMountOptionsInUse(s *corev1.PodSpec) bool {
	for _, c := range append(append([]corev1.Container{}, s.InitContainers...), s.Containers...) {
		for _, m := range c.VolumeMounts {
			if len(m.BindMountOptions) > 0 {
				return true
			}
		}
	}
	for _, c := range s.EphemeralContainers {
		for _, m := range c.VolumeMounts {
			if len(m.BindMountOptions) > 0 {
				return true
			}
		}
	}
	return false
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
