package podspec

import corev1 "k8s.io/api/core/v1"

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
