package apiserver_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// Bad requests get kube-apiserver's status codes and reasons, never a 500.
func TestBadRequests(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	rc := clientset(t, srv).CoreV1().RESTClient()
	ctx := t.Context()
	post := func(ctx context.Context, body string) error {
		return rc.Post().Namespace("default").Resource("configmaps").
			SetHeader("Content-Type", "application/json").Body([]byte(body)).Do(ctx).Error()
	}

	for _, tt := range []struct {
		name   string
		err    error
		code   int32
		reason string
	}{
		{"malformed JSON", post(ctx, `{"apiVersion":"v1","kind":"ConfigMap",`), http.StatusBadRequest, ""},
		{"wrong kind", post(ctx, `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"x"}}`), http.StatusBadRequest, "BadRequest"},
		{"unknown field (strict)", rc.Post().Namespace("default").Resource("configmaps").Param("fieldValidation", "Strict").
			SetHeader("Content-Type", "application/json").
			Body([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"bogus":1}`)).Do(ctx).Error(), http.StatusBadRequest, "BadRequest"},
		{"body over 3 MiB", post(ctx, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"big"},"data":{"k":"`+strings.Repeat("x", 3<<20)+`"}}`),
			http.StatusRequestEntityTooLarge, "RequestEntityTooLarge"},
		{"patch that does not apply", rc.Patch(types.JSONPatchType).Namespace("default").Resource("configmaps").Name("missing").
			Body([]byte(`[{"op":"replace","path":"/data/x","value":"y"}]`)).Do(ctx).Error(), http.StatusNotFound, "NotFound"},
		{"namespace mismatch", rc.Post().Namespace("default").Resource("configmaps").SetHeader("Content-Type", "application/json").
			Body([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"other"}}`)).Do(ctx).Error(),
			http.StatusBadRequest, "BadRequest"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			require.Error(t, tt.err)
			st := statusOf(t, tt.err)
			assert.Equal(t, tt.code, st.Code, st.Message)
			if tt.reason != "" {
				assert.EqualValues(t, tt.reason, st.Reason, st.Message)
			}
			assert.False(t, apierrors.IsInternalError(tt.err))
		})
	}
}

// A body of another kind names the types as kube-apiserver's error does:
// it decodes into its internal version (package core), not into v1.
func TestWrongKindNamesTheInternalType(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	for _, tt := range []struct{ resource, body, want string }{
		{"configmaps", `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"x"}}`,
			`Secret in version "v1" cannot be handled as a ConfigMap: converting (v1.Secret) to (core.ConfigMap): unknown conversion`},
		{"events", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}`,
			`ConfigMap in version "v1" cannot be handled as a Event: converting (v1.ConfigMap) to (core.Event): unknown conversion`},
	} {
		err := clientset(t, srv).CoreV1().RESTClient().Post().Namespace("default").Resource(tt.resource).
			SetHeader("Content-Type", "application/json").Body([]byte(tt.body)).Do(t.Context()).Error()
		require.Error(t, err)
		assert.Equal(t, tt.want, statusOf(t, err).Message)
	}
	err := clientset(t, srv).AppsV1().RESTClient().Post().Namespace("default").Resource("deployments").
		SetHeader("Content-Type", "application/json").Body([]byte(`{"apiVersion":"apps/v1","kind":"StatefulSet","metadata":{"name":"x"}}`)).Do(t.Context()).Error()
	require.Error(t, err)
	assert.Equal(t, `StatefulSet in version "v1" cannot be handled as a Deployment: converting (v1.StatefulSet) to (apps.Deployment): unknown conversion`,
		statusOf(t, err).Message)
}
