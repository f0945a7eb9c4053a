package apiserver_test

import (
	"context"
	"fmt"
	"log"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/timing"
)

// ExampleOptions_timing runs a server with shaken timing and prints the
// seed to replay it with; the API answers as it always does.
func ExampleOptions_timing() {
	srv, err := apiserver.New(apiserver.Options{Timing: timing.Shake(0)})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()
	if err := srv.Start(ctx); err != nil {
		log.Fatal(err)
	}
	seed := srv.Timing().Seed // print it in CI; pass timing.Shake(seed) to replay
	fmt.Println(seed != 0)

	client, err := srv.Clientset()
	if err != nil {
		log.Fatal(err)
	}
	cm, err := client.CoreV1().ConfigMaps("default").Create(ctx,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "shaken"}}, metav1.CreateOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(cm.Name)
	// Output:
	// true
	// shaken
}
