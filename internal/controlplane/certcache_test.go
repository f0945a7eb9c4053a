package controlplane

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apiserver/pkg/authentication/authenticator"
)

// countingAuthenticator counts the requests next answers.
type countingAuthenticator struct {
	next  authenticator.Request
	calls atomic.Int32
}

func (c *countingAuthenticator) AuthenticateRequest(r *http.Request) (*authenticator.Response, bool, error) {
	c.calls.Add(1)
	return c.next.AuthenticateRequest(r)
}

// A verified certificate's user is remembered until a certificate of its
// chain expires, then verified again; each request gets its own copy (the
// group adder in front changes it). Another CA's certificate is refused
// at every request, by the authenticators themselves.
func TestVerifiedCertsUntilExpiry(t *testing.T) {
	t.Parallel()
	keys, err := LoadKeys("")
	require.NoError(t, err)
	t.Cleanup(keys.Remove)
	v := certAuthenticator(keys)
	counted := &countingAuthenticator{next: v.next}
	v.next = counted
	var clock atomic.Pointer[time.Time]
	v.now = func() time.Time { return *clock.Load() }
	start := time.Now()
	clock.Store(&start)
	bob, err := keys.CA.Client("bob", "", []string{"devs"})
	require.NoError(t, err)
	cert := parseCert(t, bob.CertPEM)

	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			resp, ok, err := v.AuthenticateRequest(requestWith(cert))
			assert.NoError(t, err)
			assert.True(t, ok)
			assert.Equal(t, "bob", resp.User.GetName())
			assert.Equal(t, []string{"devs"}, resp.User.GetGroups())
			resp.User.GetExtra()["changed"] = []string{"by the caller"}
		})
	}
	wg.Wait()
	first := counted.calls.Load()
	resp, _, _ := v.AuthenticateRequest(requestWith(cert))
	assert.NotContains(t, resp.User.GetExtra(), "changed", "a copy each time")
	assert.Equal(t, first, counted.calls.Load(), "remembered")

	expired := cert.NotAfter.Add(time.Second)
	clock.Store(&expired)
	_, ok, err := v.AuthenticateRequest(requestWith(cert))
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, first+1, counted.calls.Load(), "verified again once a certificate of the chain expired")

	other, err := keys.FrontProxy.ca.Client("bob", "", nil) // not the front proxy's name
	require.NoError(t, err)
	for i := range 2 {
		_, ok, err = v.AuthenticateRequest(requestWith(parseCert(t, other.CertPEM)))
		assert.False(t, ok)
		assert.Error(t, err)
		assert.Equal(t, first+2+int32(i), counted.calls.Load(), "a refusal is not remembered")
	}
}

func requestWith(cert *x509.Certificate) *http.Request {
	r, _ := http.NewRequest(http.MethodGet, "/api", nil)
	r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}}
	return r
}
