package kubelet

import (
	"net/netip"
	"sync"
)

// ipam hands out the addresses of a node's pod CIDR, as a CNI plugin's
// host-local IPAM does: the first free one from .2, each in use once.
// The addresses are simulated: nothing listens at them but what a test
// registers (HandlePort), reached through the kubelet's in-process cluster
// network; the server's Service resolver never dials them.
type ipam struct {
	mu     sync.Mutex
	prefix netip.Prefix
	used   map[netip.Addr]bool
}

func newIPAM(cidr string) *ipam {
	return &ipam{prefix: netip.MustParsePrefix(cidr), used: map[netip.Addr]bool{}}
}

// allocate returns a free address, or "" when the range is full (as the
// real plugin, the pod's sandbox then cannot start).
func (p *ipam) allocate() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	a := p.prefix.Addr().Next().Next() // .0 is the network, .1 the gateway
	for ; p.prefix.Contains(a); a = a.Next() {
		if !p.used[a] && a.Next().IsValid() && p.prefix.Contains(a.Next()) { // not the broadcast address
			p.used[a] = true
			return a.String()
		}
	}
	return ""
}

// release frees ip.
func (p *ipam) release(ip string) {
	if a, err := netip.ParseAddr(ip); err == nil {
		p.mu.Lock()
		delete(p.used, a)
		p.mu.Unlock()
	}
}
