package apiserver_test

import (
	"context"
	"fmt"
	"log"

	apiserverinternalv1alpha1 "k8s.io/api/apiserverinternal/v1alpha1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/providers"
)

// ExampleNew starts a server, creates a ConfigMap through client-go and reads
// back what the server stored.
func ExampleNew() {
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
	_, err = client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "greeting"},
		Data:       map[string]string{"hello": "world"},
	}, metav1.CreateOptions{})
	if err != nil {
		log.Fatal(err)
	}
	cm, err := client.CoreV1().ConfigMaps("default").Get(ctx, "greeting", metav1.GetOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(cm.Name, cm.Data["hello"], cm.UID != "")

	// The real API machinery validates: names must be DNS subdomains.
	_, err = client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "Not_Valid"},
	}, metav1.CreateOptions{})
	fmt.Println(err)
	// Output:
	// greeting world true
	// ConfigMap "Not_Valid" is invalid: metadata.name: Invalid value: "Not_Valid": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')
}

// Example_provider serves a group of your own next to the built-in ones:
// registry.Kind describes each resource and registry.Group makes the
// provider (see storageVersions in provider_test.go for the whole of it,
// OpenAPI definitions included).
func Example_provider() {
	srv, err := apiserver.New(apiserver.Options{Providers: []providers.Provider{storageVersions{}}})
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
	sv, err := client.InternalV1alpha1().StorageVersions().Create(ctx, &apiserverinternalv1alpha1.StorageVersion{
		ObjectMeta: metav1.ObjectMeta{Name: "apps.deployments"}}, metav1.CreateOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(sv.Name, sv.UID != "")
	// Output: apps.deployments true
}

// ExampleKubernetesVersion prints the release a server reports at /version,
// the one of the Kubernetes modules kubeembed is built with.
func ExampleKubernetesVersion() {
	fmt.Println(apiserver.KubernetesVersion())
	// Output: 1.37.2
}

// ExampleServer_Snapshot seeds a server once and restores it, as a suite
// would before each spec instead of starting a server per spec.
func ExampleServer_Snapshot() {
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
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "seed"}}, metav1.CreateOptions{}); err != nil {
		log.Fatal(err)
	}
	// The seed includes what the controllers make (kube-root-ca.crt).
	if err := srv.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}
	seeded, err := srv.Snapshot()
	if err != nil {
		log.Fatal(err)
	}

	// A spec changes the cluster...
	if err := cms.Delete(ctx, "seed", metav1.DeleteOptions{}); err != nil {
		log.Fatal(err)
	}
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "scratch"}}, metav1.CreateOptions{}); err != nil {
		log.Fatal(err)
	}
	// ...and the next starts from the seed again.
	if err := srv.Restore(ctx, seeded); err != nil {
		log.Fatal(err)
	}
	list, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		log.Fatal(err)
	}
	for _, cm := range list.Items {
		fmt.Println(cm.Name)
	}
	// Output:
	// kube-root-ca.crt
	// seed
}

// ExampleServer_WaitIdle deletes a namespace and an owner, and waits for the
// server's controllers (namespace deletion, garbage collection) to finish,
// with no polling.
func ExampleServer_WaitIdle() {
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
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}, metav1.CreateOptions{}); err != nil {
		log.Fatal(err)
	}
	cms := client.CoreV1().ConfigMaps("default")
	owner, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		log.Fatal(err)
	}
	ref := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dependent",
		OwnerReferences: []metav1.OwnerReference{ref}}}, metav1.CreateOptions{}); err != nil {
		log.Fatal(err)
	}

	if err := client.CoreV1().Namespaces().Delete(ctx, "team", metav1.DeleteOptions{}); err != nil {
		log.Fatal(err)
	}
	if err := cms.Delete(ctx, "owner", metav1.DeleteOptions{}); err != nil {
		log.Fatal(err)
	}
	if err := srv.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}
	_, err = client.CoreV1().Namespaces().Get(ctx, "team", metav1.GetOptions{})
	fmt.Println("namespace:", apierrors.IsNotFound(err))
	_, err = cms.Get(ctx, "dependent", metav1.GetOptions{})
	fmt.Println("dependent:", apierrors.IsNotFound(err))
	// Output:
	// namespace: true
	// dependent: true
}

// Pods run on the server's simulated node: scheduled, started by its
// simulated kubelet, Ready with an IP; the test decides how containers
// end.
func ExampleServer_Kubelet() {
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
	pods := client.CoreV1().Pods("default")
	_, err = pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx:1.27"}}}}, metav1.CreateOptions{})
	if err != nil {
		log.Fatal(err)
	}
	if err := srv.WaitIdle(ctx); err != nil { // scheduled, started
		log.Fatal(err)
	}
	pod, err := pods.Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(pod.Spec.NodeName, pod.Status.Phase, pod.Status.ContainerStatuses[0].Ready)

	// The container crashes: the kubelet restarts it.
	if err := srv.Kubelet().Exit(ctx, "default", "web", "nginx", 1); err != nil {
		log.Fatal(err)
	}
	if err := srv.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}
	pod, err = pods.Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		log.Fatal(err)
	}
	s := pod.Status.ContainerStatuses[0]
	fmt.Println(s.RestartCount, s.LastTerminationState.Terminated.Reason, s.LastTerminationState.Terminated.ExitCode)
	// Output:
	// node-0 Running true
	// 1 Error 1
}

// A client for any user: the server's CA signs a client certificate for
// it. Until RBAC grants it something, a user may only ask who it is.
func ExampleServer_RESTConfigFor() {
	srv, err := apiserver.New(apiserver.Options{Controllers: []controllers.Name{}})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()
	if err := srv.Start(ctx); err != nil {
		log.Fatal(err)
	}
	alice, err := srv.ClientsetFor(&user.DefaultInfo{Name: "alice", Groups: []string{"developers"}})
	if err != nil {
		log.Fatal(err)
	}
	review, err := alice.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(review.Status.UserInfo.Username, review.Status.UserInfo.Groups)
	_, err = alice.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{})
	fmt.Println(err)
	// Output:
	// alice [developers system:authenticated]
	// secrets is forbidden: User "alice" cannot list resource "secrets" in API group "" in the namespace "default"
}

// Run a controller as its service account with exactly the RBAC manifests
// the project ships (kubebuilder's config/rbac): the missing permission
// fails as it would in a cluster, and the error says which.
func ExampleOptions_rbacPaths() {
	srv, err := apiserver.New(apiserver.Options{RBACPaths: []string{"testdata/rbac"}, Controllers: []controllers.Name{}})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()
	if err := srv.Start(ctx); err != nil {
		log.Fatal(err)
	}
	cfg, err := srv.RESTConfigForServiceAccount(ctx, "system", "controller-manager")
	if err != nil {
		log.Fatal(err)
	}
	manager := kubernetes.NewForConfigOrDie(cfg)
	_, err = manager.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
	fmt.Println("configmaps:", err)
	_, err = manager.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{})
	fmt.Println("secrets:", err)

	// The fix: the marker +kubebuilder:rbac:groups="",resources=secrets,verbs=list
	// adds this rule to role.yaml.
	admin, err := srv.Clientset()
	if err != nil {
		log.Fatal(err)
	}
	role, err := admin.RbacV1().ClusterRoles().Get(ctx, "manager-role", metav1.GetOptions{})
	if err != nil {
		log.Fatal(err)
	}
	role.Rules = append(role.Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"list"}})
	if _, err := admin.RbacV1().ClusterRoles().Update(ctx, role, metav1.UpdateOptions{}); err != nil {
		log.Fatal(err)
	}
	_, err = manager.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{})
	fmt.Println("secrets after the fix:", err)
	// Output:
	// configmaps: <nil>
	// secrets: secrets is forbidden: User "system:serviceaccount:system:controller-manager" cannot list resource "secrets" in API group "" in the namespace "default"
	// secrets after the fix: <nil>
}

// ExampleServer_InProcess gives a user's configuration (here a client
// certificate's, from RESTConfigFor) the in-process transport: the same
// authentication, authorization and admission as over TLS, no socket.
func ExampleServer_InProcess() {
	srv, err := apiserver.New(apiserver.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()
	if err := srv.Start(ctx); err != nil {
		log.Fatal(err)
	}
	overTLS, err := srv.RESTConfigFor(&user.DefaultInfo{Name: "alice"})
	if err != nil {
		log.Fatal(err)
	}
	inProcess, err := srv.InProcess(overTLS)
	if err != nil {
		log.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(inProcess)
	if err != nil {
		log.Fatal(err)
	}
	review, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("authenticated as", review.Status.UserInfo.Username)
	_, err = client.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{})
	fmt.Println("alice may list secrets:", !apierrors.IsForbidden(err))
	// Output:
	// authenticated as alice
	// alice may list secrets: false
}

// ExampleServer_Reset puts a started server back to what it was once
// started, as apiservertest does between the tests that share a server.
func ExampleServer_Reset() {
	srv, err := apiserver.New(apiserver.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()
	if err := srv.Start(ctx); err != nil {
		log.Fatal(err)
	}
	if err := srv.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}
	pristine, err := srv.Snapshot()
	if err != nil {
		log.Fatal(err)
	}

	client, err := srv.Clientset()
	if err != nil {
		log.Fatal(err)
	}
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "test-1"}}, metav1.CreateOptions{}); err != nil {
		log.Fatal(err)
	}
	if err := srv.Reset(ctx, pristine); err != nil {
		log.Fatal(err)
	}
	// Clients made before the reset are cut off; a new one sees the
	// server as it started.
	client, err = srv.Clientset()
	if err != nil {
		log.Fatal(err)
	}
	_, err = client.CoreV1().Namespaces().Get(ctx, "test-1", metav1.GetOptions{})
	fmt.Println("test-1 after the reset:", apierrors.ReasonForError(err))
	// Output:
	// test-1 after the reset: NotFound
}
