package memory_test

import (
	"context"
	"fmt"
	"log"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apiserver/pkg/storage"

	"github.com/kubeembed/apiserver/storage/memory"
)

// ExampleBackend_NewStore stores a ConfigMap, updates it with optimistic
// concurrency and lists it at the first revision, as one would against etcd.
func ExampleBackend_NewStore() {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		log.Fatal(err)
	}
	codec := serializer.NewCodecFactory(scheme).LegacyCodec(corev1.SchemeGroupVersion)

	backend := memory.NewBackend(memory.Options{})
	defer backend.Close()
	store, err := backend.NewStore(memory.Config{
		Codec:          codec,
		Prefix:         "/registry",
		ResourcePrefix: "/configmaps",
		GroupResource:  schema.GroupResource{Resource: "configmaps"},
		NewFunc:        func() runtime.Object { return &corev1.ConfigMap{} },
		NewListFunc:    func() runtime.Object { return &corev1.ConfigMapList{} },
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	created := &corev1.ConfigMap{}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "default"}, Data: map[string]string{"v": "1"}}
	if err := store.Create(ctx, "/configmaps/default/app", cm, created, 0); err != nil {
		log.Fatal(err)
	}
	updated := &corev1.ConfigMap{}
	err = store.GuaranteedUpdate(ctx, "/configmaps/default/app", updated, false, nil,
		storage.SimpleUpdate(func(obj runtime.Object) (runtime.Object, error) {
			obj.(*corev1.ConfigMap).Data["v"] = "2"
			return obj, nil
		}), nil)
	if err != nil {
		log.Fatal(err)
	}
	old := &corev1.ConfigMapList{}
	err = store.GetList(ctx, "/configmaps/default", storage.ListOptions{
		Recursive: true, Predicate: storage.Everything,
		ResourceVersion: created.ResourceVersion, ResourceVersionMatch: metav1.ResourceVersionMatchExact,
	}, old)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(created.ResourceVersion, updated.ResourceVersion, updated.Data["v"], old.Items[0].Data["v"])
	// Output: 2 3 2 1
}
