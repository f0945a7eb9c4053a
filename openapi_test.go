package apiserver_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// OpenAPI v3 is served through the aggregator for every group, the same
// in every server of the process (the core tier's documents are computed
// once per process).
func TestOpenAPIV3(t *testing.T) {
	t.Parallel()
	fetch := func(t *testing.T, cfg *rest.Config, path string) []byte {
		t.Helper()
		hc, err := rest.HTTPClientFor(cfg)
		require.NoError(t, err)
		resp, err := hc.Get(cfg.Host + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return body
	}
	a := apiservertest.Start(t)
	b := apiservertest.Start(t)
	rootA := fetch(t, a.RESTConfig(), "/openapi/v3")
	rootB := fetch(t, b.RESTConfig(), "/openapi/v3")
	var discovery struct {
		Paths map[string]struct {
			ServerRelativeURL string `json:"serverRelativeURL"`
		} `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(rootA, &discovery))
	for _, gv := range []string{"api/v1", "apis/apps/v1", "apis/batch/v1", "apis/apiextensions.k8s.io/v1", "apis/apiregistration.k8s.io/v1"} {
		require.Contains(t, discovery.Paths, gv)
	}
	assert.JSONEq(t, string(rootA), string(rootB))

	apps := fetch(t, b.RESTConfig(), discovery.Paths["apis/apps/v1"].ServerRelativeURL)
	var spec struct {
		Components struct {
			Schemas map[string]any `json:"schemas"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(apps, &spec))
	assert.Contains(t, spec.Components.Schemas, "io.k8s.api.apps.v1.Deployment")
}

// /openapi/v2 serves the built-in types and the CRDs, as JSON and as the
// protobuf client-go's discovery asks for (helm validates manifests with
// it).
func TestOpenAPIV2(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t, apiservertest.WithCRDPaths("testdata/crds"))
	disc, err := srv.DiscoveryClient()
	require.NoError(t, err)
	doc, err := disc.OpenAPISchema() // protobuf
	require.NoError(t, err)
	names := map[string]bool{}
	for _, d := range doc.GetDefinitions().GetAdditionalProperties() {
		names[d.GetName()] = true
	}
	for _, want := range []string{"io.k8s.api.apps.v1.Deployment", "io.k8s.api.core.v1.Pod",
		"io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition",
		"io.k8s.kube-aggregator.pkg.apis.apiregistration.v1.APIService"} {
		assert.True(t, names[want], "definition %s", want)
	}
	var crd string
	for n := range names {
		if strings.HasSuffix(n, ".Widget") {
			crd = n
		}
	}
	assert.NotEmpty(t, crd, "the CRD's schema is published")

	hc, err := rest.HTTPClientFor(srv.RESTConfig())
	require.NoError(t, err)
	resp, err := hc.Get(srv.URL() + "/openapi/v2")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	assert.Contains(t, string(body), `"swagger":"2.0"`)
	assert.NotEmpty(t, resp.Header.Get("Etag"))
}
