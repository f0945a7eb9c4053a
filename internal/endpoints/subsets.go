// Package endpoints lays out core/v1 Endpoints subsets as kube-apiserver's
// and kube-controller-manager's code does (k8s.io/kubernetes's
// pkg/api/v1/endpoints, which is not published): the endpoint controller
// writes and compares Endpoints in this layout, and the
// endpointslicemirroring controller mirrors them from it.
package endpoints

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"hash"
	"hash/fnv"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/dump"
)

// RepackSubsets returns subsets in the canonical layout upstream's
// Endpoints are written and compared in (k8s.io/kubernetes's
// pkg/api/v1/endpoints.RepackSubsets, which is not published): one subset
// per set of addresses offering the same ports, each address once (by IP
// and target UID; not ready wins over ready), addresses sorted by IP then
// UID, ports and subsets in the order of their hashes. The result is newly
// allocated.
func RepackSubsets(subsets []corev1.EndpointSubset) []corev1.EndpointSubset {
	// Each port, with the addresses offering it.
	all := map[addressKey]*corev1.EndpointAddress{}
	byPort := map[corev1.EndpointPort]addressSet{}
	for i := range subsets {
		if len(subsets[i].Ports) == 0 {
			// Addresses without ports are kept, under a sentinel port.
			mapAddressesByPort(&subsets[i], corev1.EndpointPort{Port: -1}, all, byPort)
		}
		for _, port := range subsets[i].Ports {
			mapAddressesByPort(&subsets[i], port, all, byPort)
		}
	}
	// Each set of addresses, with the ports it offers.
	addrsByKey := map[string]addressSet{}
	portsByKey := map[string][]corev1.EndpointPort{}
	for port, addrs := range byPort {
		key := hashAddresses(addrs)
		addrsByKey[key] = addrs
		if port.Port > 0 {
			portsByKey[key] = append(portsByKey[key], port)
		} else if _, ok := portsByKey[key]; !ok {
			portsByKey[key] = nil
		}
	}
	final := []corev1.EndpointSubset{}
	for key, ports := range portsByKey {
		var ready, notReady []corev1.EndpointAddress
		for addr, isReady := range addrsByKey[key] {
			if isReady {
				ready = append(ready, *addr)
			} else {
				notReady = append(notReady, *addr)
			}
		}
		final = append(final, corev1.EndpointSubset{Addresses: ready, NotReadyAddresses: notReady, Ports: ports})
	}
	return sortSubsets(final)
}

// addressKey tells addresses apart: the same IP may be two pods' (hosts
// that give pods the node's IP).
type addressKey struct {
	ip  string
	uid types.UID
}

// addressSet is addresses and whether each is ready.
type addressSet map[*corev1.EndpointAddress]bool

func mapAddressesByPort(subset *corev1.EndpointSubset, port corev1.EndpointPort, all map[addressKey]*corev1.EndpointAddress, byPort map[corev1.EndpointPort]addressSet) {
	for i := range subset.Addresses {
		mapAddressByPort(&subset.Addresses[i], port, true, all, byPort)
	}
	for i := range subset.NotReadyAddresses {
		mapAddressByPort(&subset.NotReadyAddresses[i], port, false, all, byPort)
	}
}

// mapAddressByPort notes that addr offers port; an address not ready for
// a port stays so.
func mapAddressByPort(addr *corev1.EndpointAddress, port corev1.EndpointPort, ready bool, all map[addressKey]*corev1.EndpointAddress, byPort map[corev1.EndpointPort]addressSet) {
	key := addressKey{ip: addr.IP}
	if addr.TargetRef != nil {
		key.uid = addr.TargetRef.UID
	}
	existing := all[key]
	if existing == nil {
		existing = new(corev1.EndpointAddress)
		*existing = *addr // a copy: the input is not written
		all[key] = existing
	}
	if byPort[port] == nil {
		byPort[port] = addressSet{}
	}
	if wasReady, found := byPort[port][existing]; !found || wasReady {
		byPort[port][existing] = ready
	}
}

type addrReady struct {
	addr  *corev1.EndpointAddress
	ready bool
}

// hashAddresses is a key for a set of addresses: the hash of its sorted
// list.
func hashAddresses(addrs addressSet) string {
	list := make([]addrReady, 0, len(addrs))
	for addr, ready := range addrs {
		list = append(list, addrReady{addr, ready})
	}
	sort.Slice(list, func(i, j int) bool { return lessEndpointAddress(list[i].addr, list[j].addr) })
	return hex.EncodeToString(hashObject(fnv.New128a(), list))
}

// lessEndpointAddress orders addresses by IP (as bytes), then target UID.
func lessEndpointAddress(a, b *corev1.EndpointAddress) bool {
	if c := bytes.Compare([]byte(a.IP), []byte(b.IP)); c != 0 {
		return c < 0
	}
	if b.TargetRef == nil {
		return false
	}
	if a.TargetRef == nil {
		return true
	}
	return a.TargetRef.UID < b.TargetRef.UID
}

// sortSubsets sorts each subset's addresses and ports, then the subsets,
// in place, as upstream's SortSubsets.
func sortSubsets(subsets []corev1.EndpointSubset) []corev1.EndpointSubset {
	for i := range subsets {
		s := &subsets[i]
		sort.Sort(addrsByIPAndUID(s.Addresses))
		sort.Sort(addrsByIPAndUID(s.NotReadyAddresses))
		sort.Sort(byHash[corev1.EndpointPort](s.Ports))
	}
	sort.Sort(byHash[corev1.EndpointSubset](subsets))
	return subsets
}

// hashObject is upstream's DeepHashObject: the hash of obj's dump, which
// follows pointers.
func hashObject(h hash.Hash, obj any) []byte {
	h.Reset()
	fmt.Fprintf(h, "%v", dump.ForHash(obj))
	return h.Sum(nil)
}

type addrsByIPAndUID []corev1.EndpointAddress

func (s addrsByIPAndUID) Len() int           { return len(s) }
func (s addrsByIPAndUID) Swap(i, j int)      { s[i], s[j] = s[j], s[i] }
func (s addrsByIPAndUID) Less(i, j int) bool { return lessEndpointAddress(&s[i], &s[j]) }

// byHash orders values by the fnv128a hash of their dump.
type byHash[T any] []T

func (s byHash[T]) Len() int      { return len(s) }
func (s byHash[T]) Swap(i, j int) { s[i], s[j] = s[j], s[i] }
func (s byHash[T]) Less(i, j int) bool {
	h := fnv.New128a()
	return bytes.Compare(hashObject(h, s[i]), hashObject(h, s[j])) < 0
}
