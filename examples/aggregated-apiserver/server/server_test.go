package server_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/dynamic"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/examples/aggregated-apiserver/server"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

var fruitsGVR = schema.GroupVersionResource{Group: "fruits.example.kubeembed.dev", Version: "v1", Resource: "fruits"}

// aggregate starts kubeembed and the fruits server behind it, as in a
// cluster: a Service fruits-system/fruits leading to it, and an APIService
// with its CA; it returns once the APIService is Available.
func aggregate(t *testing.T) (*apiserver.Server, string) {
	srv := apiservertest.Start(t)
	kc, err := srv.Kubeconfig()
	require.NoError(t, err)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, kc, 0o600))

	fruits, err := server.New(server.Options{Kubeconfig: kubeconfig, Service: "fruits", Namespace: "fruits-system"})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fruits.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	apiservertest.RouteService(t, srv, "fruits-system", "fruits", fruits.Port())
	agg, err := aggregatorclient.NewForConfig(srv.RESTConfig())
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(srv.RESTConfig())
	require.NoError(t, err)
	_, err = agg.ApiregistrationV1().APIServices().Create(t.Context(), &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: "v1.fruits.example.kubeembed.dev"},
		Spec: apiregistrationv1.APIServiceSpec{Group: fruitsGVR.Group, Version: "v1",
			Service:  &apiregistrationv1.ServiceReference{Namespace: "fruits-system", Name: "fruits", Port: ptr.To[int32](443)},
			CABundle: fruits.CABundle(), GroupPriorityMinimum: 1000, VersionPriority: 15},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		s, err := agg.ApiregistrationV1().APIServices().Get(ctx, "v1.fruits.example.kubeembed.dev", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		available := false
		for _, c := range s.Status.Conditions {
			if c.Type == apiregistrationv1.Available {
				available = c.Status == apiregistrationv1.ConditionTrue
			}
		}
		if !available {
			return false, nil
		}
		// The aggregator's proxy learns of the availability from its own
		// informer, a moment after the status says so (kube-aggregator's
		// registration controller): until then it answers 503, as
		// kube-apiserver's does. CI met that moment once.
		_, err = dyn.Resource(fruitsGVR).Namespace("default").List(ctx, metav1.ListOptions{})
		return !apierrors.IsServiceUnavailable(err), nil
	}), "APIService Available and proxied to")
	return srv, kubeconfig
}

func fruit(name, color string, sweetness int64) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "fruits.example.kubeembed.dev/v1", "kind": "Fruit",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"color": color, "sweetness": sweetness},
	}}
}

// Through kubeembed's aggregator: create, get, list, the server's own
// validation errors, and its authorization delegated back to kubeembed's
// RBAC for the caller the front proxy names.
func TestFruitsThroughTheAggregator(t *testing.T) {
	t.Parallel()
	srv, _ := aggregate(t)
	dyn, err := dynamic.NewForConfig(srv.RESTConfig())
	require.NoError(t, err)
	fruits := dyn.Resource(fruitsGVR).Namespace("default")

	_, err = fruits.Create(t.Context(), fruit("apple", "red", 7), metav1.CreateOptions{})
	require.NoError(t, err)
	got, err := fruits.Get(t.Context(), "apple", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "red", got.Object["spec"].(map[string]any)["color"])
	list, err := fruits.List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	assert.Len(t, list.Items, 1)

	_, err = fruits.Create(t.Context(), fruit("lemon", "", 11), metav1.CreateOptions{})
	require.True(t, apierrors.IsInvalid(err), "%v", err)
	assert.Equal(t, `Fruit.fruits.example.kubeembed.dev "lemon" is invalid: [spec.color: Required value: a fruit has a color, `+
		`spec.sweetness: Invalid value: 11: must be from 0 to 10]`, err.Error())

	alice, err := srv.RESTConfigFor(&user.DefaultInfo{Name: "alice"})
	require.NoError(t, err)
	_, err = dynamic.NewForConfigOrDie(alice).Resource(fruitsGVR).Namespace("default").List(t.Context(), metav1.ListOptions{})
	require.True(t, apierrors.IsForbidden(err), "%v", err)
	assert.Contains(t, err.Error(), `User "alice" cannot list resource "fruits" in API group "fruits.example.kubeembed.dev" in the namespace "default"`)

	client, err := srv.Clientset()
	require.NoError(t, err)
	_, err = client.RbacV1().ClusterRoles().Create(t.Context(), &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "fruit-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{fruitsGVR.Group}, Resources: []string{"fruits"}, Verbs: []string{"get", "list"}}}},
		metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = client.RbacV1().ClusterRoleBindings().Create(t.Context(), &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "bob"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "fruit-reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "bob"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	bob, err := srv.RESTConfigFor(&user.DefaultInfo{Name: "bob"})
	require.NoError(t, err)
	list, err = dynamic.NewForConfigOrDie(bob).Resource(fruitsGVR).Namespace("default").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err, "bob may list fruits: the fruits server asked kubeembed")
	assert.Len(t, list.Items, 1)
}

// kubectl sees the aggregated resource: discovery (kubectl get) and the
// OpenAPI the aggregator merged from the fruits server (kubectl explain).
func TestFruitsWithKubectl(t *testing.T) {
	t.Parallel()
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not on PATH")
	}
	srv, kubeconfig := aggregate(t)
	home := t.TempDir()
	run := func(args ...string) (string, error) {
		cmd := exec.CommandContext(t.Context(), kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+home)
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	dyn, err := dynamic.NewForConfig(srv.RESTConfig())
	require.NoError(t, err)
	// The aggregator checks the APIService again and again; one check the
	// fruits server refused (CI saw a 403 just after Available) makes it
	// unavailable until the next, and the aggregator answers 503 meanwhile,
	// as kube-apiserver's does.
	require.NoError(t, wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(fruitsGVR).Namespace("default").Create(ctx, fruit("cherry", "dark red", 9), metav1.CreateOptions{})
		if apierrors.IsServiceUnavailable(err) {
			return false, nil
		}
		return err == nil, err
	}))

	out, err := run("get", "fruits", "-o", "name")
	require.NoError(t, err, out)
	assert.Equal(t, "fruit.fruits.example.kubeembed.dev/cherry", out)
	out, err = run("api-resources", "--api-group", fruitsGVR.Group, "--no-headers")
	require.NoError(t, err, out)
	assert.Regexp(t, `^fruits\s+fruits.example.kubeembed.dev/v1\s+true\s+Fruit$`, out)
	// The aggregator fetches the fruits server's OpenAPI in the background.
	require.NoError(t, wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		out, err = run("explain", "fruits.spec.sweetness")
		return err == nil, nil
	}), "kubectl explain: %s", out)
	assert.Contains(t, out, "Sweetness from 0 to 10.")
}
