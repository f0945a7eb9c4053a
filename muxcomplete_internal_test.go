package apiserver

import (
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
)

// A path no tier serves is a 503 with Retry-After while the tiers are still
// installing their routes and discovery, then a 404, as on kube-apiserver: a
// client early for a CRD's or an aggregated group's path retries rather than
// concluding it is not there.
func TestUnknownPathBeforeMuxComplete(t *testing.T) {
	t.Parallel()
	srv, err := New(Options{})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, srv.Close()) })
	srv.clients.Load().SetHandler(srv.cp.Handler()) // Start does so once ready
	client, err := rest.HTTPClientFor(srv.InProcessRESTConfig())
	require.NoError(t, err)
	get := func() (*http.Response, string) {
		resp, err := client.Get(srv.InProcessRESTConfig().Host + "/apis/example.com/v1/widgets")
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, string(body)
	}
	resp, body := get()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, body)
	assert.Equal(t, "5", resp.Header.Get("Retry-After"))
	assert.Contains(t, body, "before all known HTTP paths have been installed")

	require.NoError(t, srv.Start(t.Context()))
	resp, body = get()
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, body)
}
