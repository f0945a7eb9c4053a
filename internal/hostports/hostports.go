// Package hostports reads a pod's host ports as kube-scheduler's NodePorts
// plugin and the kubelet's admission read them, for the simulated
// scheduler and kubelet.
package hostports

import corev1 "k8s.io/api/core/v1"

// Port is a host port: an IP ("0.0.0.0" for every address), a protocol
// and a port.
type Port struct {
	IP       string
	Protocol corev1.Protocol
	Port     int32
}

// Of are the pod's host ports: its containers' and its sidecars'
// (restartable init containers), an empty IP meaning every address and an
// empty protocol TCP.
func Of(spec *corev1.PodSpec) []Port {
	var out []Port
	add := func(c corev1.Container) {
		for _, port := range c.Ports {
			if port.HostPort <= 0 {
				continue
			}
			hp := Port{IP: port.HostIP, Protocol: port.Protocol, Port: port.HostPort}
			if hp.IP == "" {
				hp.IP = "0.0.0.0"
			}
			if hp.Protocol == "" {
				hp.Protocol = corev1.ProtocolTCP
			}
			out = append(out, hp)
		}
	}
	for _, c := range spec.Containers {
		add(c)
	}
	for _, c := range spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			add(c)
		}
	}
	return out
}

// Conflicts: p and q cannot both be bound on one node (the same port and
// protocol on the same address, or either on every address).
func (p Port) Conflicts(q Port) bool {
	return p.Port == q.Port && p.Protocol == q.Protocol && (p.IP == q.IP || p.IP == "0.0.0.0" || q.IP == "0.0.0.0")
}
