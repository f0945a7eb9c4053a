package controller_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"

	"github.com/kubeembed/apiserver/internal/controller"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// The handlers added to a FanOutFactory's informer before it runs share
// one client-go registration (one goroutine: the second is handed an event
// only after the first has handled it), each seeing the initial list as
// initial; one added once the informer runs has the store replayed to it.
// The informer is the factory's own, whose lister reads its store.
func TestFanOutFactoryHandlersShareARegistration(t *testing.T) {
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
	raw := informers.NewSharedInformerFactory(client, 0)
	f := controller.FanOutFactory(raw)
	informer := f.Core().V1().ConfigMaps().Informer()

	first, second, late := newSeen(), newSeen(), newSeen()
	held := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(held) }) }
	firstReg, err := informer.AddEventHandler(first.handler(map[string]chan struct{}{"t-held": held}))
	require.NoError(t, err)
	secondReg, err := informer.AddEventHandler(second.handler(nil))
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(t.Context())
	defer raw.Shutdown()
	defer cancel()
	defer release() // a failure below must not leave the handler blocked (Shutdown waits for it)
	f.Start(ctx.Done())
	first.wait(t, "t-before")
	second.wait(t, "t-before")
	require.Eventually(t, func() bool { return firstReg.HasSynced() && secondReg.HasSynced() }, 30*time.Second, time.Millisecond)
	handledInTurn(t, first, second, create, release)
	listed, err := f.Core().V1().ConfigMaps().Lister().ConfigMaps("default").List(labels.Everything())
	require.NoError(t, err)
	assert.GreaterOrEqual(t, len(listed), 3)

	lateReg, err := informer.AddEventHandler(late.handler(nil))
	require.NoError(t, err)
	require.Eventually(t, lateReg.HasSynced, 30*time.Second, time.Millisecond)
	for _, n := range []string{"t-before", "t-held", "t-after"} { // the store's order
		initial, handled := late.initialOf(n)
		assert.True(t, handled && initial, "%s replayed", n)
	}
}
