package controlplane

import (
	"crypto/x509"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
)

// verifiedCerts remembers the user of each client certificate the
// server's CA verified, until a certificate of the chain expires, so that
// a client's later requests do not verify its chain again. Upstream's
// x509 authenticators verify the presented chain at every request (an
// ECDSA signature checked and a chain built, and first a failed
// verification against the front proxy's CA): ~60% of an in-process
// ConfigMap create by a client certificate, which envtest's clients and
// Server.RESTConfigFor's use.
//
// The answer is upstream's: next (the front proxy's authenticator, then
// the CA's) answers the first request of a chain, and a later one gets a
// copy of that answer. A chain that verified keeps verifying, with the
// same user, until one of its certificates or the CA expires (the CA is
// the server's for its lifetime; x509 verification reads nothing else
// that can change). Certificates of the front proxy's CA are never
// remembered: their user comes from the request's headers. Failures are
// not remembered: next answers each.
type verifiedCerts struct {
	next authenticator.Request
	// front verifies certificates against the front proxy's CA;
	// caNotAfter is when the server's CA expires.
	front      x509.VerifyOptions
	caNotAfter time.Time
	now        func() time.Time // x509 verification's clock

	mu    sync.Mutex
	users map[string]rememberedUser // by the chain's DER
}

// maxRememberedCerts bounds verifiedCerts: a server that meets more
// certificates forgets them all and starts again.
const maxRememberedCerts = 1024

type rememberedUser struct {
	user      user.Info
	audiences authenticator.Audiences
	until     time.Time
}

func newVerifiedCerts(next authenticator.Request, front x509.VerifyOptions, ca *x509.Certificate) *verifiedCerts {
	return &verifiedCerts{next: next, front: front, caNotAfter: ca.NotAfter, now: time.Now, users: map[string]rememberedUser{}}
}

// AuthenticateRequest implements authenticator.Request.
func (v *verifiedCerts) AuthenticateRequest(req *http.Request) (*authenticator.Response, bool, error) {
	if req.TLS == nil || len(req.TLS.PeerCertificates) == 0 {
		return v.next.AuthenticateRequest(req)
	}
	chain := req.TLS.PeerCertificates
	if u, ok := v.lookup(chain); ok && v.now().Before(u.until) {
		return &authenticator.Response{User: copyUser(u.user), Audiences: slices.Clone(u.audiences)}, true, nil
	}
	resp, ok, err := v.next.AuthenticateRequest(req)
	if ok && err == nil && !v.frontProxys(chain) {
		v.remember(chain, rememberedUser{user: copyUser(resp.User), audiences: slices.Clone(resp.Audiences), until: v.expiry(chain)})
	}
	return resp, ok, err
}

func (v *verifiedCerts) lookup(chain []*x509.Certificate) (rememberedUser, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(chain) == 1 {
		u, ok := v.users[string(chain[0].Raw)] // no copy of the bytes
		return u, ok
	}
	u, ok := v.users[chainKey(chain)]
	return u, ok
}

func (v *verifiedCerts) remember(chain []*x509.Certificate, u rememberedUser) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.users) >= maxRememberedCerts {
		clear(v.users)
	}
	v.users[chainKey(chain)] = u
}

// frontProxys reports whether the front proxy's CA verifies chain.
func (v *verifiedCerts) frontProxys(chain []*x509.Certificate) bool {
	opts := v.front
	if len(chain) > 1 {
		opts.Intermediates = x509.NewCertPool()
		for _, c := range chain[1:] {
			opts.Intermediates.AddCert(c)
		}
	}
	_, err := chain[0].Verify(opts)
	return err == nil
}

// expiry is when the first of chain's certificates, or the CA, expires.
func (v *verifiedCerts) expiry(chain []*x509.Certificate) time.Time {
	until := v.caNotAfter
	for _, c := range chain {
		if c.NotAfter.Before(until) {
			until = c.NotAfter
		}
	}
	return until
}

// chainKey is the chain's certificates, DER, one after the other.
func chainKey(chain []*x509.Certificate) string {
	var b strings.Builder
	for _, c := range chain {
		b.Write(c.Raw)
	}
	return b.String()
}

// copyUser is a copy of u that shares nothing with it.
func copyUser(u user.Info) user.Info {
	extra := maps.Clone(u.GetExtra())
	for k, v := range extra {
		extra[k] = slices.Clone(v)
	}
	return &user.DefaultInfo{Name: u.GetName(), UID: u.GetUID(), Groups: slices.Clone(u.GetGroups()), Extra: extra}
}
