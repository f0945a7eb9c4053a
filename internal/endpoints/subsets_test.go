package endpoints

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

func ref(uid string) *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: uid, UID: types.UID(uid)}
}

func addrs(ips ...string) []corev1.EndpointAddress {
	var out []corev1.EndpointAddress
	for _, ip := range ips {
		out = append(out, corev1.EndpointAddress{IP: ip, TargetRef: ref(map[string]string{
			"10.0.0.1": "b", "10.0.0.2": "a", "10.0.0.3": "c", "10.0.0.4": "e"}[ip])})
	}
	return out
}

func port(name string, n int32, proto corev1.Protocol) corev1.EndpointPort {
	return corev1.EndpointPort{Name: name, Port: n, Protocol: proto}
}

// RepackSubsets groups, dedupes and orders as upstream's: the expected
// order of subsets and ports here is what k8s.io/kubernetes v1.37.2's
// pkg/api/v1/endpoints.RepackSubsets returns for the same input (run
// outside this module, which must not import it).
func TestRepackSubsetsAsUpstream(t *testing.T) {
	t.Parallel()
	http, metrics := port("http", 8080, corev1.ProtocolTCP), port("metrics", 9100, corev1.ProtocolTCP)
	in := []corev1.EndpointSubset{
		{Addresses: addrs("10.0.0.2"), Ports: []corev1.EndpointPort{http}},
		{Addresses: addrs("10.0.0.1"), Ports: []corev1.EndpointPort{http}},
		{NotReadyAddresses: addrs("10.0.0.3"), Ports: []corev1.EndpointPort{http}},
		{Addresses: addrs("10.0.0.2"), Ports: []corev1.EndpointPort{metrics}},
		{Addresses: addrs("10.0.0.1"), Ports: []corev1.EndpointPort{metrics}},
		{NotReadyAddresses: addrs("10.0.0.3"), Ports: []corev1.EndpointPort{metrics}},
		{Addresses: addrs("10.0.0.1"), Ports: []corev1.EndpointPort{port("dns", 53, corev1.ProtocolUDP)}},
		{Addresses: addrs("10.0.0.4"), Ports: []corev1.EndpointPort{metrics}},
		{Addresses: addrs("10.0.0.4"), Ports: []corev1.EndpointPort{
			port("a", 1, corev1.ProtocolTCP), port("b", 2, corev1.ProtocolTCP), port("c", 3, corev1.ProtocolTCP)}},
	}
	want := []corev1.EndpointSubset{
		{Addresses: addrs("10.0.0.1", "10.0.0.2"), NotReadyAddresses: addrs("10.0.0.3"), Ports: []corev1.EndpointPort{http}},
		{Addresses: addrs("10.0.0.4"), Ports: []corev1.EndpointPort{
			port("c", 3, corev1.ProtocolTCP), port("b", 2, corev1.ProtocolTCP), port("a", 1, corev1.ProtocolTCP)}},
		{Addresses: addrs("10.0.0.1"), Ports: []corev1.EndpointPort{port("dns", 53, corev1.ProtocolUDP)}},
		{Addresses: addrs("10.0.0.1", "10.0.0.2", "10.0.0.4"), NotReadyAddresses: addrs("10.0.0.3"), Ports: []corev1.EndpointPort{metrics}},
	}
	if diff := cmp.Diff(want, RepackSubsets(in)); diff != "" {
		t.Errorf("RepackSubsets (-want +got):\n%s", diff)
	}
}

// Cases of upstream's TestPackSubsets: empty input, addresses without
// ports, duplicates (by IP and target UID), not ready winning over ready.
func TestRepackSubsetsCases(t *testing.T) {
	t.Parallel()
	uid := func(u string) *corev1.ObjectReference { return &corev1.ObjectReference{UID: types.UID(u)} }
	for _, tc := range []struct {
		name        string
		given, want []corev1.EndpointSubset
	}{{
		name:  "empty addresses",
		given: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{}, Ports: []corev1.EndpointPort{{Port: 111}}}},
		want:  []corev1.EndpointSubset{},
	}, {
		name:  "no ports",
		given: []corev1.EndpointSubset{{NotReadyAddresses: []corev1.EndpointAddress{{IP: "1.2.3.4"}}, Ports: []corev1.EndpointPort{}}},
		want:  []corev1.EndpointSubset{{NotReadyAddresses: []corev1.EndpointAddress{{IP: "1.2.3.4"}}}},
	}, {
		name: "same IP, two pods",
		given: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "1.2.3.4", TargetRef: uid("uid-2")},
			{IP: "1.2.3.4", TargetRef: uid("uid-1")}, {IP: "1.2.3.4", TargetRef: uid("uid-2")}}, Ports: []corev1.EndpointPort{{Port: 111}}}},
		want: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "1.2.3.4", TargetRef: uid("uid-1")},
			{IP: "1.2.3.4", TargetRef: uid("uid-2")}}, Ports: []corev1.EndpointPort{{Port: 111}}}},
	}, {
		name: "not ready wins",
		given: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "1.2.3.4"}}, Ports: []corev1.EndpointPort{{Port: 111}}},
			{NotReadyAddresses: []corev1.EndpointAddress{{IP: "1.2.3.4"}}, Ports: []corev1.EndpointPort{{Port: 111}}}},
		want: []corev1.EndpointSubset{{NotReadyAddresses: []corev1.EndpointAddress{{IP: "1.2.3.4"}}, Ports: []corev1.EndpointPort{{Port: 111}}}},
	}} {
		if diff := cmp.Diff(tc.want, RepackSubsets(tc.given)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}
