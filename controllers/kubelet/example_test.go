package kubelet_test

import (
	"context"
	"fmt"
	"log"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers/kubelet"
)

// An image the nodes cannot pull: its container waits as a kubelet reports
// it, ErrImagePull with the runtime's error, then ImagePullBackOff; a
// container that ends says why, as the runtime does.
func ExampleKubelet_FailImagePulls() {
	srv, err := apiserver.New(apiserver.Options{}) // the cluster profile: one node, node-0
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
	srv.Kubelet().FailImagePulls("example.com/app:v2", "")
	pods := client.CoreV1().Pods("default")
	for name, image := range map[string]string{"bad": "example.com/app:v2", "good": "nginx:1.27"} {
		_, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}}}, metav1.CreateOptions{})
		if err != nil {
			log.Fatal(err)
		}
	}
	if err := srv.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}
	bad, err := pods.Get(ctx, "bad", metav1.GetOptions{})
	if err != nil {
		log.Fatal(err)
	}
	// ErrImagePull, then (a second later, on the kubelet's back-off)
	// ImagePullBackOff.
	reason := bad.Status.ContainerStatuses[0].State.Waiting.Reason
	fmt.Println(bad.Status.Phase, reason == "ErrImagePull" || reason == "ImagePullBackOff")

	// The good one is killed for its memory.
	if err := srv.Kubelet().ExitWith(ctx, "default", "good", "app", kubelet.Exit{Code: 137, Reason: "OOMKilled"}); err != nil {
		log.Fatal(err)
	}
	if err := srv.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}
	good, err := pods.Get(ctx, "good", metav1.GetOptions{})
	if err != nil {
		log.Fatal(err)
	}
	last := good.Status.ContainerStatuses[0].LastTerminationState.Terminated
	fmt.Println(last.Reason, last.ExitCode, good.Status.ContainerStatuses[0].RestartCount)
	// Output:
	// Pending true
	// OOMKilled 137 1
}
