package controller_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	apiserver "github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/faults"
	"github.com/kubeembed/apiserver/internal/controller"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// seen records the ConfigMaps a handler was handed, and whether in the
// initial list.
type seen struct {
	mu      sync.Mutex
	initial map[string]bool
	changed chan string
}

func newSeen() *seen { return &seen{initial: map[string]bool{}, changed: make(chan string, 100)} }

func (s *seen) handler(block map[string]chan struct{}) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerDetailedFuncs{AddFunc: func(obj any, initial bool) {
		name := obj.(metav1.Object).GetName()
		if !strings.HasPrefix(name, "t-") {
			return // the server's own
		}
		if c := block[name]; c != nil {
			<-c
		}
		s.mu.Lock()
		s.initial[name] = initial
		s.mu.Unlock()
		s.changed <- name
	}}
}

func (s *seen) initialOf(name string) (initial, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	initial, ok = s.initial[name]
	return initial, ok
}

func (s *seen) wait(t *testing.T, name string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case n := <-s.changed:
			if n == name {
				return
			}
		case <-deadline:
			t.Fatalf("%s never handled", name)
		}
	}
}

// newMonitors returns monitors of srv's resources, and run, which runs
// them (and their CRD informer) until the function it returns is called.
func newMonitors(t *testing.T, srv *apiserver.Server) (m *controller.Monitors, run func() (stop func())) {
	t.Helper()
	client, err := srv.Clientset()
	require.NoError(t, err)
	ext, err := srv.APIExtensionsClientset()
	require.NoError(t, err)
	crds := apiextensionsinformers.NewSharedInformerFactory(ext, 0).Apiextensions().V1().CustomResourceDefinitions().Informer()
	m, err = controller.NewMonitors(metadata.NewForConfigOrDie(srv.RESTConfig()), client.Discovery(), crds, nil)
	require.NoError(t, err)
	return m, func() func() {
		// Their log (an undiscovered CRD given up on) goes to the test's.
		_, ctx := ktesting.NewTestContext(t)
		ctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() { crds.RunWithContext(ctx) })
		wg.Go(func() { m.Run(ctx) })
		return func() { cancel(); wg.Wait() }
	}
}

// handledInTurn checks that first and second, handlers of one
// registration, saw t-before as initial, and that second is handed
// nothing while first holds t-held (created, then t-after), and both once
// released.
func handledInTurn(t *testing.T, first, second *seen, create func(string), release func()) {
	t.Helper()
	for _, s := range []*seen{first, second} {
		initial, _ := s.initialOf("t-before")
		assert.True(t, initial)
	}
	create("held")
	create("after")
	select {
	case n := <-second.changed:
		t.Fatalf("the second handler saw %s while the first held its event", n)
	case <-time.After(100 * time.Millisecond): // a negative check: nothing may come
	}
	release()
	second.wait(t, "t-held")
	second.wait(t, "t-after")
}

// The monitors' subscribers that add their handlers before a resource's
// informer runs each see the initial list as initial, are synced once they
// have, and are handed an event only after the handlers added before them
// (one goroutine calls them all). A handler removed sees no more; one
// added after the informer runs gets the store replayed as client-go does.
func TestMonitorsSubscribersInTurn(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	client, err := srv.Clientset()
	require.NoError(t, err)
	create := func(name string) {
		_, err := client.CoreV1().ConfigMaps("default").Create(t.Context(),
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "t-" + name}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	create("before")
	m, run := newMonitors(t, srv)

	first, second, late := newSeen(), newSeen(), newSeen()
	held := make(chan struct{})
	// The subscribers run on the monitors' goroutine.
	var mu sync.Mutex
	regs := map[*seen]cache.ResourceEventHandlerRegistration{}
	var informer cache.SharedIndexInformer
	subscribe := func(s *seen, block map[string]chan struct{}) {
		m.Subscribe(func(added, _ []controllers.Resource) {
			for _, r := range added {
				if r.Resource == "configmaps" && r.Group == "" {
					reg, err := r.Informer.AddEventHandler(s.handler(block))
					assert.NoError(t, err)
					mu.Lock()
					informer, regs[s] = r.Informer, reg
					mu.Unlock()
				}
			}
		})
	}
	synced := func(of ...*seen) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			for _, s := range of {
				if regs[s] == nil || !regs[s].HasSynced() {
					return false
				}
			}
			return true
		}
	}
	subscribe(first, map[string]chan struct{}{"t-held": held})
	subscribe(second, nil)
	defer run()()
	var once sync.Once
	release := func() { once.Do(func() { close(held) }) }
	defer release() // a failure below must not leave the handler blocked

	first.wait(t, "t-before")
	second.wait(t, "t-before")
	require.Eventually(t, synced(first, second), 30*time.Second, time.Millisecond)
	handledInTurn(t, first, second, create, release)
	initial, _ := second.initialOf("t-after")
	assert.False(t, initial)

	mu.Lock()
	informerOf, firstReg := informer, regs[first]
	mu.Unlock()
	require.NoError(t, informerOf.RemoveEventHandler(firstReg))
	create("later")
	second.wait(t, "t-later")
	_, handled := first.initialOf("t-later")
	assert.False(t, handled, "removed")

	subscribe(late, nil)
	late.wait(t, "t-later")
	require.Eventually(t, synced(late), 30*time.Second, time.Millisecond)
	for _, n := range []string{"t-before", "t-held", "t-after", "t-later"} {
		initial, _ := late.initialOf(n)
		assert.True(t, initial, n)
	}
}

// A subscriber may ask whether its registration has synced while it holds
// a lock its handler takes (the Observer does): the handlers run on the
// informer's processing goroutine, and asking must not wait for them. A
// resource with no objects has synced after its empty list.
func TestMonitorsHasSyncedWhileTheHandlerWaits(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	client, err := srv.Clientset()
	require.NoError(t, err)
	_, err = client.CoreV1().ConfigMaps("default").Create(t.Context(),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "t-first"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	m, run := newMonitors(t, srv)

	var mu sync.Mutex // the subscriber's, taken by its handler
	entered := make(chan struct{}, 1)
	configMapsReg := make(chan cache.ResourceEventHandlerRegistration, 1)
	podTemplatesReg := make(chan cache.ResourceEventHandlerRegistration, 1)
	m.Subscribe(func(added, _ []controllers.Resource) {
		for _, r := range added {
			switch {
			case r.Resource == "configmaps" && r.Group == "":
				reg, err := r.Informer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(any) {
					select {
					case entered <- struct{}{}:
					default:
					}
					mu.Lock()
					mu.Unlock() //nolint:staticcheck // the handler only waits for the lock
				}})
				assert.NoError(t, err)
				configMapsReg <- reg
			case r.Resource == "podtemplates" && r.Group == "":
				reg, err := r.Informer.AddEventHandler(cache.ResourceEventHandlerFuncs{})
				assert.NoError(t, err)
				podTemplatesReg <- reg
			}
		}
	})
	mu.Lock()
	defer run()()

	<-entered // the handler now waits for mu, which this test holds
	configMaps, podTemplates := <-configMapsReg, <-podTemplatesReg
	asked := make(chan bool)
	go func() { asked <- configMaps.HasSynced() }()
	select {
	case synced := <-asked:
		mu.Unlock()
		assert.False(t, synced, "a handler has not finished its initial list")
	case <-time.After(10 * time.Second):
		mu.Unlock() // frees the handler, then the question
		<-asked
		t.Fatal("HasSynced waited for a handler")
	}
	require.Eventually(t, configMaps.HasSynced, 30*time.Second, time.Millisecond)
	require.Eventually(t, podTemplates.HasSynced, 30*time.Second, time.Millisecond, "an empty list")
	select {
	case <-podTemplates.HasSyncedChecker().Done():
	default:
		t.Fatal("the registration's DoneChecker is not done once it has synced")
	}
}

// A relist (the watch answered 410 Gone) hands out what changed while the
// informer was not watching, and not the objects it already had as they
// were: client-go hands those only to handlers that asked for resyncs.
func TestMonitorsRelistHandsOutOnlyWhatChanged(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	client, err := srv.Clientset()
	require.NoError(t, err)
	review, err := client.AuthenticationV1().SelfSubjectReviews().Create(t.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	require.NoError(t, err)
	create := func(name string) {
		_, err := client.CoreV1().ConfigMaps("default").Create(t.Context(),
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "t-" + name}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	create("a")
	create("b")
	// The first watch that resumes from the list ends at once with 410
	// Gone: the reflector lists again.
	var gone atomic.Bool
	srv.Faults().Add(faults.Rule{Match: faults.Match{Verb: "watch", Resource: "configmaps", User: review.Status.UserInfo.Username},
		When: func(r faults.Request) bool {
			return r.ResourceVersion != "" && r.ResourceVersion != "0" && gone.CompareAndSwap(false, true)
		},
		Action: faults.WatchGone()})

	m, run := newMonitors(t, srv)
	added, updated := newSeen(), make(chan string, 100)
	m.Subscribe(func(resources, _ []controllers.Resource) {
		for _, r := range resources {
			if r.Resource == "configmaps" && r.Group == "" {
				_, err := r.Informer.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{AddFunc: added.handler(nil).OnAdd,
					UpdateFunc: func(_, obj any) { updated <- obj.(metav1.Object).GetName() }})
				assert.NoError(t, err)
			}
		}
	})
	defer run()()
	added.wait(t, "t-a")
	added.wait(t, "t-b")
	require.Eventually(t, gone.Load, 30*time.Second, time.Millisecond, "the informer never watched")
	create("c") // after the 410: handed out once the informer lists or watches again
	added.wait(t, "t-c")
	for {
		select {
		case name := <-updated:
			if strings.HasPrefix(name, "t-") {
				t.Errorf("%s, unchanged, was handed out as an update after the relist", name)
			}
		default:
			return // the relist's updates, if any, came before t-c's add
		}
	}
}

// An established CRD that discovery does not serve yet (the apiextensions
// server's discovery follows its condition, late under load) keeps the
// monitors pending, and they try again until it is served. They used to
// give up after their quick tries and say they were idle: the garbage
// collector did not see the CRD's resources until its 30 s rediscovery,
// while WaitIdle said it had caught up (CI, on etcd behind the watch
// cache).
func TestMonitorsWaitForAnEstablishedCRD(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t, apiservertest.WithCRDPaths("../../testdata/crds"))
	var lagging atomic.Bool
	lagging.Store(true)
	failDiscovery(t, srv, lagging.Load)

	m, run := newMonitors(t, srv)
	widgets := make(chan struct{})
	var once sync.Once
	m.Subscribe(func(added, _ []controllers.Resource) {
		for _, r := range added {
			if r.Resource == "widgets" {
				once.Do(func() { close(widgets) })
			}
		}
	})
	defer run()()
	idle := func() bool { return m.Idle(nil) == nil }
	// Longer than the quick tries (~0.8 s): a negative check.
	require.Never(t, idle, 3*time.Second, 10*time.Millisecond, "idle while an established CRD was not monitored")
	assert.ErrorContains(t, m.Idle(nil), "widgets.example.kubeembed.dev")
	lagging.Store(false)
	require.Eventually(t, idle, 30*time.Second, time.Millisecond)
	select {
	case <-widgets:
	default:
		t.Fatal("idle, and the CRD's resource was never handed to the subscribers")
	}
}

// A CRD that stays established and undiscovered (its group version taken
// by an APIService, here discovery failing for good) is waited for no
// longer than the monitors' grace: WaitIdle must not hang on it.
func TestMonitorsStopWaitingForACRDNeverDiscovered(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t, apiservertest.WithCRDPaths("../../testdata/crds"))
	failDiscovery(t, srv, func() bool { return true })
	m, run := newMonitors(t, srv)
	controller.SetMissingGrace(m, 2*time.Second)
	defer run()()
	require.Eventually(t, func() bool { return m.Idle(nil) == nil }, 30*time.Second, 10*time.Millisecond,
		"the monitors waited for a CRD never discovered past their grace")
}

// A CRD none of whose versions is served is established and never
// discovered: the monitors do not wait for it.
func TestMonitorsDoNotWaitForACRDServingNothing(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	ext, err := srv.APIExtensionsClientset()
	require.NoError(t, err)
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "gadgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "gadgets", Singular: "gadget", Kind: "Gadget", ListKind: "GadgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: false, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}}}}}}
	_, err = ext.ApiextensionsV1().CustomResourceDefinitions().Create(t.Context(), crd, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		got, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(t.Context(), crd.Name, metav1.GetOptions{})
		return err == nil && slices.ContainsFunc(got.Status.Conditions, func(c apiextensionsv1.CustomResourceDefinitionCondition) bool {
			return c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue
		})
	}, 30*time.Second, 10*time.Millisecond)
	m, run := newMonitors(t, srv)
	defer run()()
	// Well within the grace (30 s): the CRD is not waited for at all.
	require.Eventually(t, func() bool { return m.Idle(nil) == nil }, 10*time.Second, 10*time.Millisecond)
}

// failDiscovery makes the discovery of the groups (GET /apis) fail with 503
// for the admin clients of srv (those newMonitors uses) while failing says.
func failDiscovery(t *testing.T, srv *apiserver.Server, failing func() bool) {
	t.Helper()
	client, err := srv.Clientset()
	require.NoError(t, err)
	review, err := client.AuthenticationV1().SelfSubjectReviews().Create(t.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	require.NoError(t, err)
	apiservertest.InjectFault(t, srv, faults.Rule{Match: faults.Match{User: review.Status.UserInfo.Username},
		When:   func(r faults.Request) bool { return r.Path == "/apis" && failing() },
		Action: faults.Fail(apierrors.NewServiceUnavailable("discovery fails"))})
}
