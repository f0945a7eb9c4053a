package kubelet_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/kubeembed/apiserver/controllers"
)

// nodes/proxy reaches the simulated kubelet's healthz and pods, as a
// kubelet's; a path it does not serve is its 404.
func TestNodeProxyHealthzAndPods(t *testing.T) {
	t.Parallel()
	e := start(t, controllers.Nodes(2)...)
	e.runningPod(t, simplePod("here"))
	elsewhere := simplePod("elsewhere")
	elsewhere.Spec.NodeName = "node-1"
	e.runningPod(t, elsewhere) // in the kubelet's informer before /pods is asked
	proxy := func(path string) ([]byte, error) {
		return e.client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes/node-0/proxy", path).DoRaw(t.Context())
	}

	body, err := proxy("healthz")
	require.NoError(t, err)
	assert.Equal(t, "ok", string(body))
	body, err = e.client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes/node-0/proxy/healthz").Param("verbose", "").DoRaw(t.Context())
	require.NoError(t, err)
	assert.Equal(t, "[+]ping ok\n[+]log ok\n[+]syncloop ok\nhealthz check passed\n", string(body))
	body, err = proxy("healthz/syncloop")
	require.NoError(t, err)
	assert.Equal(t, "ok", string(body))

	body, err = proxy("pods")
	require.NoError(t, err)
	obj, err := runtime.Decode(scheme.Codecs.UniversalDeserializer(), body)
	require.NoError(t, err, "%s", body)
	list, ok := obj.(*corev1.PodList)
	require.True(t, ok, "%T", obj)
	require.Len(t, list.Items, 1, "only node-0's pods")
	assert.Equal(t, "here", list.Items[0].Name)

	_, err = proxy("stats/summary")
	assert.True(t, apierrors.IsNotFound(err), "%v", err)
}
