package controller_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/internal/controller"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// panicsOn is a handler that panics when handed the ConfigMap name.
func panicsOn(name string) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		if obj.(metav1.Object).GetName() == name {
			panic("handler panics on " + name)
		}
	}}
}

// A handler that panics takes its event from no other handler of the
// informer, as with client-go's own registrations, when the process goes
// on (utilruntime.ReallyCrash off; on, the default, the process crashes as
// client-go's does). For the typed factory's informers (FanOutFactory: one
// registration shared) and the resource monitors' (handlers called
// directly), a handler added after the panicking one gets the event, and
// the panicking one gets the next.
//
// Not parallel: it turns utilruntime.ReallyCrash, a setting of the
// process, off while it runs, and the panics' logging (PanicHandlers: the
// panics are the test's, their stacks would fill its output); the
// parallel tests wait until it is done.
func TestHandlerPanicLeavesTheOthersTheirEvents(t *testing.T) {
	crash, handlers := utilruntime.ReallyCrash, utilruntime.PanicHandlers
	utilruntime.ReallyCrash, utilruntime.PanicHandlers = false, nil
	t.Cleanup(func() { utilruntime.ReallyCrash, utilruntime.PanicHandlers = crash, handlers })
	srv := apiservertest.Start(t)
	client, err := srv.Clientset()
	require.NoError(t, err)

	t.Run("FanOutFactory", func(t *testing.T) {
		raw := informers.NewSharedInformerFactory(client, 0)
		f := controller.FanOutFactory(raw)
		inf := f.Core().V1().ConfigMaps().Informer()
		before, after := newSeen(), newSeen()
		for _, h := range []cache.ResourceEventHandler{panicsOn("t-fan-boom"), before.handler(nil), panicsOn("t-fan-boom"), after.handler(nil)} {
			_, err := inf.AddEventHandler(h)
			require.NoError(t, err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer raw.Shutdown()
		defer cancel()
		f.Start(ctx.Done())
		handedOnAfterPanics(t, client, "fan", before, after)
	})

	t.Run("Monitors", func(t *testing.T) {
		m, run := newMonitors(t, srv)
		before, after := newSeen(), newSeen()
		informers := make(chan cache.SharedIndexInformer, 1)
		m.Subscribe(func(resources, _ []controllers.Resource) {
			for _, r := range resources {
				if r.Resource != "configmaps" || r.Group != "" {
					continue
				}
				select {
				case informers <- r.Informer:
				default: // only the first is asked for
				}
				for _, h := range []cache.ResourceEventHandler{panicsOn("t-monitor-boom"), before.handler(nil), panicsOn("t-monitor-boom"), after.handler(nil)} {
					_, err := r.Informer.AddEventHandler(h)
					assert.NoError(t, err) // on the monitors' goroutine: no FailNow
				}
			}
		})
		defer run()()
		handedOnAfterPanics(t, client, "monitor", before, after)

		// A handler added once the informer runs is handed the store: a
		// panic there too leaves the rest of it to that handler.
		inf := <-informers
		late := newSeen()
		_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
			panicsOn("t-monitor-boom").OnAdd(obj, true)
			late.handler(nil).OnAdd(obj, true)
		}})
		require.NoError(t, err)
		late.wait(t, "t-monitor-next")
	})
}

// handedOnAfterPanics creates t-<prefix>-boom, on which handlers panic,
// then t-<prefix>-next, and waits until before and after (handlers added
// after a panicking one each) have seen both.
func handedOnAfterPanics(t *testing.T, client kubernetes.Interface, prefix string, before, after *seen) {
	t.Helper()
	for _, name := range []string{"t-" + prefix + "-boom", "t-" + prefix + "-next"} {
		_, err := client.CoreV1().ConfigMaps("default").Create(t.Context(),
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		require.NoError(t, err)
		before.wait(t, name)
		after.wait(t, name)
	}
}
