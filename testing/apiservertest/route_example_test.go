package apiservertest_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregator "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// ExampleRouteService puts an API server the test runs itself (here a
// stand-in serving one empty group version) behind the Service
// widgets-system/widgets-api, and registers its APIService: the aggregator
// finds it through the Service and marks it Available.
// examples/aggregated-apiserver does the same with a real server built on
// k8s.io/apiserver.
func ExampleRouteService() {
	t := &exampleT{}
	defer t.cleanup()
	srv := apiservertest.Start(t)

	backend := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"widgets.example.com/v1","resources":[]}`)
	}))
	defer backend.Close()
	apiservertest.RouteService(t, srv, "widgets-system", "widgets-api", backend.Listener.Addr().(*net.TCPAddr).Port)

	agg, err := aggregator.NewForConfig(srv.RESTConfig())
	if err != nil {
		t.Fatalf("%v", err)
	}
	_, err = agg.ApiregistrationV1().APIServices().Create(t.Context(), &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: "v1.widgets.example.com"},
		Spec: apiregistrationv1.APIServiceSpec{Group: "widgets.example.com", Version: "v1",
			Service:               &apiregistrationv1.ServiceReference{Namespace: "widgets-system", Name: "widgets-api", Port: ptr.To[int32](443)},
			InsecureSkipTLSVerify: true, GroupPriorityMinimum: 1000, VersionPriority: 15},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("%v", err)
	}
	var available apiregistrationv1.APIServiceCondition
	_ = wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		s, err := agg.ApiregistrationV1().APIServices().Get(ctx, "v1.widgets.example.com", metav1.GetOptions{})
		if err == nil && len(s.Status.Conditions) > 0 {
			available = s.Status.Conditions[0]
		}
		return available.Status == apiregistrationv1.ConditionTrue, nil
	})
	fmt.Println(available.Type, available.Status, available.Reason)
	// Output: Available True Passed
}
