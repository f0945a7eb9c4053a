package controller_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensionsinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"

	"github.com/kubeembed/apiserver/controllers"
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
// informer runs share one client-go registration: each sees the initial
// list as initial, is synced once it has, and is handed an event only
// after the handlers added before it (one goroutine). A handler removed
// sees no more; one added after the informer runs gets the store replayed
// as client-go does.
func TestMonitorsSubscribersShareARegistration(t *testing.T) {
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
	ext, err := srv.APIExtensionsClientset()
	require.NoError(t, err)
	crds := apiextensionsinformers.NewSharedInformerFactory(ext, 0).Apiextensions().V1().CustomResourceDefinitions().Informer()
	m, err := controller.NewMonitors(metadata.NewForConfigOrDie(srv.RESTConfig()), client.Discovery(), crds, nil)
	require.NoError(t, err)

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
	ctx, cancel := context.WithCancel(t.Context())
	var run sync.WaitGroup
	run.Go(func() { crds.RunWithContext(ctx) })
	run.Go(func() { m.Run(ctx) })
	defer run.Wait()
	defer cancel()
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
