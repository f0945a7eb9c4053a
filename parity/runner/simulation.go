package runner

import (
	"context"
	"sync"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/controllers/kubelet"
	"github.com/kubeembed/apiserver/controllers/provisioner"
)

// StartSimulation runs kubeembed's simulated kubelet and provisioner
// against t, a server that is not kubeembed (kube-apiserver), as clients of
// its API only: so that what kube-scheduler and kube-controller-manager
// do with the nodes and pods they report is compared with what kubeembed's
// own scheduler and controllers do. stop ends them and waits.
func StartSimulation(ctx context.Context, t *Target) (_ *kubelet.Kubelet, stop func(), _ error) {
	rc := &rest.Config{Host: t.URL, BearerToken: t.Token, TLSClientConfig: rest.TLSClientConfig{Insecure: true}, QPS: -1}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, nil, err
	}
	ready := make(chan struct{})
	close(ready) // kube-apiserver is ready: its bootstrap objects exist
	inf := informers.NewSharedInformerFactory(client, 0)
	cfg := controllers.Config{RESTConfig: rc, Client: client, Informers: inf, Ready: ready}
	k, err := kubelet.New(cfg)
	if err != nil {
		return nil, nil, err
	}
	p, err := provisioner.New(cfg)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	inf.Start(ctx.Done())
	var wg sync.WaitGroup
	wg.Go(func() { k.Run(ctx) })
	wg.Go(func() { p.Run(ctx) })
	stop = func() {
		cancel()
		wg.Wait()
		inf.Shutdown()
	}
	if err := k.WaitStarted(ctx); err != nil {
		stop()
		return nil, nil, err
	}
	return k, stop, nil
}
