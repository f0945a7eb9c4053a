package controller_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/kubeembed/apiserver/internal/controller"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// While a handler handles a write, the listers already hold it: a sync
// that the handler's event started asks ListersCaughtUpTo for its own
// trigger and goes on, where CaughtUpTo (the handlers' view) waits for the
// handler to return.
func TestListersCaughtUpBeforeHandlersReturn(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	client, err := srv.Clientset()
	require.NoError(t, err)
	factory := informers.NewSharedInformerFactory(client, 0)
	informer := factory.Core().V1().ConfigMaps().Informer()
	entered, release := make(chan struct{}), make(chan struct{})
	o := controller.NewObserver(nil)
	cms := schema.GroupResource{Resource: "configmaps"}
	require.NoError(t, o.Watch(cms, informer, cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		if obj.(*corev1.ConfigMap).Name == "held" {
			close(entered)
			<-release
		}
	}}))
	ctx, cancel := context.WithCancel(t.Context())
	defer factory.Shutdown()
	defer cancel()
	factory.Start(ctx.Done())
	require.True(t, cache.WaitForCacheSync(ctx.Done(), informer.HasSynced))

	cm, err := client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "held"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	rv, err := strconv.ParseUint(cm.ResourceVersion, 10, 64)
	require.NoError(t, err)
	written := map[schema.GroupResource]uint64{cms: rv}
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the handler never saw the ConfigMap")
	}
	assert.NoError(t, o.ListersCaughtUpTo(written, rv))
	assert.Error(t, o.CaughtUpTo(written, rv), "the handler has not returned")
	close(release)
	wait, stop := context.WithTimeout(ctx, 30*time.Second)
	defer stop()
	assert.NoError(t, controller.Wait(wait, func() error { return o.CaughtUpTo(written, rv) }))
}
