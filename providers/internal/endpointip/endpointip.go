// Package endpointip validates the addresses of Endpoints and EndpointSlices
// as kube-apiserver does: an endpoint must be an address other hosts can
// reach, so loopback, unspecified and link-local addresses are refused.
package endpointip

import (
	"fmt"
	"net/netip"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validate returns kube-apiserver's errors for an endpoint address that
// parses as an IP (ValidateEndpointIP in k8s.io/kubernetes).
func Validate(address string, p *field.Path) field.ErrorList {
	ip, err := netip.ParseAddr(address)
	if err != nil {
		return field.ErrorList{field.Invalid(p, address, "must be a valid IP address")}
	}
	ip = ip.Unmap()
	var errs field.ErrorList
	for _, c := range []struct {
		bad bool
		msg string
	}{
		{ip.IsUnspecified(), fmt.Sprintf("may not be unspecified (%v)", address)},
		{ip.IsLoopback(), "may not be in the loopback range (127.0.0.0/8, ::1/128)"},
		{ip.IsLinkLocalUnicast(), "may not be in the link-local range (169.254.0.0/16, fe80::/10)"},
		{ip.IsLinkLocalMulticast(), "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)"},
	} {
		if c.bad {
			errs = append(errs, field.Invalid(p, address, c.msg))
		}
	}
	return errs
}
