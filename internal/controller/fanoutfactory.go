package controller

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/informers/admissionregistration"
	"k8s.io/client-go/informers/apiserverinternal"
	"k8s.io/client-go/informers/apps"
	"k8s.io/client-go/informers/autoscaling"
	"k8s.io/client-go/informers/batch"
	"k8s.io/client-go/informers/certificates"
	"k8s.io/client-go/informers/coordination"
	"k8s.io/client-go/informers/core"
	"k8s.io/client-go/informers/discovery"
	"k8s.io/client-go/informers/events"
	"k8s.io/client-go/informers/extensions"
	"k8s.io/client-go/informers/flowcontrol"
	"k8s.io/client-go/informers/internalinterfaces"
	"k8s.io/client-go/informers/lifecycle"
	"k8s.io/client-go/informers/networking"
	"k8s.io/client-go/informers/node"
	"k8s.io/client-go/informers/policy"
	"k8s.io/client-go/informers/rbac"
	"k8s.io/client-go/informers/resource"
	"k8s.io/client-go/informers/scheduling"
	"k8s.io/client-go/informers/storage"
	"k8s.io/client-go/informers/storagemigration"
	"k8s.io/client-go/tools/cache"
)

// FanOutFactory returns the informer factory f (of all namespaces, no list
// options) with each informer behind a fanOut: the handlers added to an
// informer before it runs share one client-go registration, as the
// monitors' handlers do. The controllers add ~170 handlers to a server's
// ~100 shared informers (the pod informer alone has one per controller
// that reads pods); each registration is a 16 KiB buffer and two
// goroutines, and each event a hand-off to each of them. The informers,
// their stores and their starting are f's: Start, WaitForCacheSync and
// ForResource (whose informers are f's own) are f's methods.
func FanOutFactory(f informers.SharedInformerFactory) informers.SharedInformerFactory {
	return &fanOutFactory{SharedInformerFactory: f, out: map[cache.SharedIndexInformer]*fanOut{}}
}

type fanOutFactory struct {
	informers.SharedInformerFactory

	mu  sync.Mutex
	out map[cache.SharedIndexInformer]*fanOut
}

// InformerFor implements internalinterfaces.SharedInformerFactory: f's
// informer for obj's type, behind its one fanOut.
func (f *fanOutFactory) InformerFor(obj runtime.Object, newFunc internalinterfaces.NewInformerFunc) cache.SharedIndexInformer {
	inf := f.SharedInformerFactory.InformerFor(obj, newFunc)
	f.mu.Lock()
	defer f.mu.Unlock()
	o, ok := f.out[inf]
	if !ok {
		o = newFanOut(inf)
		f.out[inf] = o
	}
	return o
}

// The groups, built on f so that their informers come from InformerFor.

const all = metav1.NamespaceAll

func (f *fanOutFactory) Admissionregistration() admissionregistration.Interface {
	return admissionregistration.New(f, all, nil)
}
func (f *fanOutFactory) Internal() apiserverinternal.Interface {
	return apiserverinternal.New(f, all, nil)
}
func (f *fanOutFactory) Apps() apps.Interface                 { return apps.New(f, all, nil) }
func (f *fanOutFactory) Autoscaling() autoscaling.Interface   { return autoscaling.New(f, all, nil) }
func (f *fanOutFactory) Batch() batch.Interface               { return batch.New(f, all, nil) }
func (f *fanOutFactory) Certificates() certificates.Interface { return certificates.New(f, all, nil) }
func (f *fanOutFactory) Coordination() coordination.Interface { return coordination.New(f, all, nil) }
func (f *fanOutFactory) Core() core.Interface                 { return core.New(f, all, nil) }
func (f *fanOutFactory) Discovery() discovery.Interface       { return discovery.New(f, all, nil) }
func (f *fanOutFactory) Events() events.Interface             { return events.New(f, all, nil) }
func (f *fanOutFactory) Extensions() extensions.Interface     { return extensions.New(f, all, nil) }
func (f *fanOutFactory) Flowcontrol() flowcontrol.Interface   { return flowcontrol.New(f, all, nil) }
func (f *fanOutFactory) Lifecycle() lifecycle.Interface       { return lifecycle.New(f, all, nil) }
func (f *fanOutFactory) Networking() networking.Interface     { return networking.New(f, all, nil) }
func (f *fanOutFactory) Node() node.Interface                 { return node.New(f, all, nil) }
func (f *fanOutFactory) Policy() policy.Interface             { return policy.New(f, all, nil) }
func (f *fanOutFactory) Rbac() rbac.Interface                 { return rbac.New(f, all, nil) }
func (f *fanOutFactory) Resource() resource.Interface         { return resource.New(f, all, nil) }
func (f *fanOutFactory) Scheduling() scheduling.Interface     { return scheduling.New(f, all, nil) }
func (f *fanOutFactory) Storage() storage.Interface           { return storage.New(f, all, nil) }
func (f *fanOutFactory) Storagemigration() storagemigration.Interface {
	return storagemigration.New(f, all, nil)
}
