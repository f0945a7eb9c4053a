package faults_test

import (
	"context"
	"fmt"
	"log"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/faults"
)

// ExampleInjector makes the next update of a ConfigMap conflict, as when
// another writer got there first, and shows the record of it.
func ExampleInjector() {
	srv, err := apiserver.New(apiserver.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()
	if err := srv.Start(ctx); err != nil {
		log.Fatal(err)
	}
	client, err := srv.Clientset()
	if err != nil {
		log.Fatal(err)
	}
	cms := client.CoreV1().ConfigMaps("default")
	cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}}, metav1.CreateOptions{})
	if err != nil {
		log.Fatal(err)
	}

	remove := srv.Faults().Add(faults.Rule{
		Match:  faults.Match{Verb: "update", Resource: "configmaps", Name: "settings"},
		Times:  1,
		Action: faults.Fail(apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "settings", fmt.Errorf("try again"))),
	})
	defer remove()
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	fmt.Println(apierrors.IsConflict(err))
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	fmt.Println(err)

	for _, r := range srv.Recorder().Records(faults.Writes) {
		fmt.Println(r.Verb, r.Resource, r.Code, r.Faulted)
	}
	// Output:
	// true
	// <nil>
	// create configmaps 201 false
	// update configmaps 409 true
	// update configmaps 200 false
}

// ExampleRecorder counts the writes a piece of code made, as a test of a
// controller asserts that it does not write when nothing changed.
func ExampleRecorder() {
	srv, err := apiserver.New(apiserver.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()
	if err := srv.Start(ctx); err != nil {
		log.Fatal(err)
	}
	client, err := srv.Clientset()
	if err != nil {
		log.Fatal(err)
	}
	_, err = client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}},
		metav1.CreateOptions{FieldManager: "my-controller"})
	if err != nil {
		log.Fatal(err)
	}
	_, _ = client.CoreV1().ConfigMaps("default").Get(ctx, "a", metav1.GetOptions{})

	byMe := faults.Matching(faults.Match{FieldManager: "my-controller"})
	fmt.Println(srv.Recorder().Count(faults.Writes), srv.Recorder().Count(faults.Writes, byMe), srv.Recorder().Count())
	// Output: 1 1 2
}
