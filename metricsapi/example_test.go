package metricsapi_test

import (
	"context"
	"fmt"
	"log"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/metricsapi"
)

// ExampleServe serves metrics.k8s.io with the simulated usage: a Running
// pod's container uses what it requests, and its node the sum, read
// through the API server as kubectl top reads it.
func ExampleServe() {
	ctx := context.Background()
	srv, err := apiserver.New(apiserver.Options{}) // the cluster profile: a node, its kubelet
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	if err := srv.Start(ctx); err != nil {
		log.Fatal(err)
	}
	metrics, err := metricsapi.Serve(ctx, srv, metricsapi.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer metrics.Close() // before the server's

	c, err := srv.Clientset()
	if err != nil {
		log.Fatal(err)
	}
	_, err = c.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("64Mi")}}}}}},
		metav1.CreateOptions{})
	if err != nil {
		log.Fatal(err)
	}
	if err := srv.WaitIdle(ctx); err != nil { // scheduled, then Running
		log.Fatal(err)
	}

	mc, err := metricsclient.NewForConfig(srv.RESTConfig())
	if err != nil {
		log.Fatal(err)
	}
	pod, err := mc.MetricsV1beta1().PodMetricses("default").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		log.Fatal(err)
	}
	app := pod.Containers[0]
	fmt.Println(pod.Name, app.Name, app.Usage.Cpu(), app.Usage.Memory())
	node, err := mc.MetricsV1beta1().NodeMetricses().Get(ctx, "node-0", metav1.GetOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(node.Name, node.Usage.Cpu(), node.Usage.Memory())
	// Output:
	// web app 250m 64Mi
	// node-0 250m 64Mi
}
