package controlplane

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
)

func TestGroupVersionOfPath(t *testing.T) {
	t.Parallel()
	for path, want := range map[string]*schema.GroupVersion{
		"/api/v1":                 {Version: "v1"},
		"/apis/apps/v1":           {Group: "apps", Version: "v1"},
		"/apis/apps/v1/":          {Group: "apps", Version: "v1"},
		"/apis/apps":              nil,
		"/api":                    nil,
		"/healthz":                nil,
		"/apis/apps/v1/namespace": nil,
	} {
		gv, ok := groupVersionOfPath(path)
		if want == nil {
			assert.False(t, ok, path)
			continue
		}
		assert.True(t, ok, path)
		assert.Equal(t, *want, gv, path)
	}
}

// Built-in group versions get kube-apiserver's discovery priorities, others
// (user providers, CRDs) the priorities kube-apiserver gives CRDs.
func TestLocalAPIServicePriorities(t *testing.T) {
	t.Parallel()
	core := localAPIService(schema.GroupVersion{Version: "v1"})
	assert.Equal(t, "v1.", core.Name)
	assert.Equal(t, apiregistrationv1.APIServiceSpec{Version: "v1", GroupPriorityMinimum: 18000, VersionPriority: 1}, core.Spec)
	crd := localAPIService(schema.GroupVersion{Group: "example.com", Version: "v1alpha1"})
	assert.Equal(t, "v1alpha1.example.com", crd.Name)
	assert.EqualValues(t, 1000, crd.Spec.GroupPriorityMinimum)
	assert.EqualValues(t, 100, crd.Spec.VersionPriority)
	assert.Nil(t, crd.Spec.Service, "local: served by a tier behind the aggregator")
}

// recordingRegistration is the autoregister controller's side of CRD
// registration: what it was asked to keep.
type recordingRegistration struct {
	synced map[string]*apiregistrationv1.APIService
}

func (r *recordingRegistration) AddAPIServiceToSyncOnStart(in *apiregistrationv1.APIService) {
	r.AddAPIServiceToSync(in)
}
func (r *recordingRegistration) AddAPIServiceToSync(in *apiregistrationv1.APIService) {
	r.synced[in.Name] = in
}
func (r *recordingRegistration) RemoveAPIServiceToSync(name string) { delete(r.synced, name) }

// The CRD registration keeps an APIService for each version a CRD serves
// (not a built-in one), and drops it when no CRD serves it any more.
func TestCRDRegistrationFollowsServedVersions(t *testing.T) {
	t.Parallel()
	informer := cache.NewSharedIndexInformer(&cache.ListWatch{}, &apiextensionsv1.CustomResourceDefinition{}, 0, cache.Indexers{})
	auto := &recordingRegistration{synced: map[string]*apiregistrationv1.APIService{}}
	reg := newCRDRegistration(informer, auto)
	store := informer.GetStore()

	widgets := crd("widgets.example.com", "example.com", crdVersion("v1", true), crdVersion("v2alpha1", true), crdVersion("v0", false))
	require.NoError(t, store.Add(widgets))
	require.NoError(t, store.Add(crd("things.apps", "apps", crdVersion("v1", true)))) // a built-in group version
	reg.sync()
	assert.Equal(t, []string{"v1.example.com", "v2alpha1.example.com"}, names(auto.synced))

	widgets = widgets.DeepCopy()
	widgets.Spec.Versions[1].Served = false
	require.NoError(t, store.Update(widgets))
	reg.sync()
	assert.Equal(t, []string{"v1.example.com"}, names(auto.synced))

	require.NoError(t, store.Delete(widgets))
	reg.sync()
	assert.Empty(t, auto.synced)
}

func crd(name, group string, versions ...apiextensionsv1.CustomResourceDefinitionVersion) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: group, Versions: versions}}
}

func crdVersion(name string, served bool) apiextensionsv1.CustomResourceDefinitionVersion {
	return apiextensionsv1.CustomResourceDefinitionVersion{Name: name, Served: served}
}

func names(m map[string]*apiregistrationv1.APIService) []string {
	var out []string
	for n := range m {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}
