// Package apiserver runs a real Kubernetes API server inside the process, for
// testing controllers against true API semantics: validation, defaulting,
// admission, server-side apply, watch, CRDs with structural schemas and CEL.
//
// New assembles the three delegating tiers kube-apiserver's CreateServerChain
// builds (kube-aggregator, the core groups, apiextensions-apiserver) on a
// loopback TLS listener with in-memory storage; Start serves it and returns
// once /readyz is ok; Close stops it. Many servers can run in one process.
//
//	srv, err := apiserver.New(apiserver.Options{})
//	if err != nil {
//		log.Fatal(err)
//	}
//	defer srv.Close()
//	if err := srv.Start(context.Background()); err != nil {
//		log.Fatal(err)
//	}
//	client, err := srv.Clientset()
//	if err != nil {
//		log.Fatal(err)
//	}
//	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "demo"}, Data: map[string]string{"k": "v"}}
//	_, err = client.CoreV1().ConfigMaps("default").Create(context.Background(), cm, metav1.CreateOptions{})
//
// In tests, use testing/apiservertest.Start, which also closes the server
// when the test ends.
package apiserver
