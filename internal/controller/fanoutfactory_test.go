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
	listed, err := f.Core().V1().ConfigMaps().Lister().ConfigMaps("default").List(labels.Everything())
	require.NoError(t, err)
	assert.GreaterOrEqual(t, len(listed), 3)

	lateReg, err := informer.AddEventHandler(late.handler(nil))
	require.NoError(t, err)
	late.wait(t, "t-before")
	late.wait(t, "t-held")
	late.wait(t, "t-after")
	require.Eventually(t, lateReg.HasSynced, 30*time.Second, time.Millisecond)
	initial, _ := late.initialOf("t-after")
	assert.True(t, initial, "replayed")
}
