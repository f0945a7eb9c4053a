// Package csrapproving is kube-controller-manager's CertificateSigningRequest
// approving controller (csrapproving): it approves kubelets' client
// certificate requests, those the kubernetes.io/kube-apiserver-client-kubelet
// signer would sign (system:node:<name> in system:nodes, client usages, no
// alternative names), when a SubjectAccessReview says the requestor may
// create certificatesigningrequests/selfnodeclient (for a request for
// itself: its user name is the common name) or certificatesigningrequests/
// nodeclient (for any node). The bootstrap ClusterRoles
// system:certificates.k8s.io:certificatesigningrequests:selfnodeclient and
// ...:nodeclient grant them; nothing binds them by default (kubeadm does).
//
// It never denies. A request it does not recognize is left to others; one
// whose requestor lacks the permission is tried again, 200 ms later,
// doubling up to 1000 s, as kube-controller-manager retries it, in case the
// permission comes: Server.WaitIdle does not wait for those retries.
package csrapproving

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	certificatesv1listers "k8s.io/client-go/listers/certificates/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/internal/certificates"
	"github.com/kubeembed/apiserver/internal/controller"
)

// workers is the number of the controller's workers, fixed in
// kube-controller-manager.
const workers = 5

// Controller is the approving controller.
type Controller struct {
	controller.Parts
	client kubernetes.Interface
	csrs   certificatesv1listers.CertificateSigningRequestLister
	queue  *controller.Queue
	// backoff spaces the retries of requests whose requestor lacks the
	// permission, per request, as upstream's queue does.
	backoff workqueue.TypedRateLimiter[string]
}

// New returns the approving controller of cfg's server.
func New(cfg controllers.Config) (*Controller, error) {
	informer := cfg.Informers.Certificates().V1().CertificateSigningRequests()
	c := &Controller{client: cfg.Client, csrs: informer.Lister(),
		// Named as kube-controller-manager's certificate controllers name
		// their queues.
		queue:   controller.NewQueue("certificate", cfg.QueueMetrics),
		backoff: workqueue.NewTypedItemExponentialFailureRateLimiter[string](200*time.Millisecond, 1000*time.Second)}
	c.Name, c.Observer, c.Queues = string(controllers.CSRApproving), controller.NewObserver(cfg.Revisions), []*controller.Queue{c.queue}
	enqueue := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if csr, ok := obj.(*certificatesv1.CertificateSigningRequest); ok {
			c.queue.Add(csr.Name)
		}
	}
	err := c.Observer.Watch(certificatesv1.Resource("certificatesigningrequests"), informer.Informer(),
		cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }, DeleteFunc: enqueue})
	if err != nil {
		return nil, fmt.Errorf("watch certificatesigningrequests: %w", err)
	}
	return c, nil
}

// Run approves requests until ctx ends.
func (c *Controller) Run(ctx context.Context) { c.queue.Run(ctx, workers, c.sync) }

// sync handles the request name unless it is gone or has its certificate.
// Its retries' backoff is forgotten once it is not waiting for a
// permission.
func (c *Controller) sync(ctx context.Context, name string) error {
	err := c.syncRequest(ctx, name)
	var later *controller.Later
	if !errors.As(err, &later) {
		c.backoff.Forget(name)
	}
	return err
}

func (c *Controller) syncRequest(ctx context.Context, name string) error {
	csr, err := c.csrs.Get(name)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("get csr %q: %w", name, err)
	case len(csr.Status.Certificate) > 0:
		return nil
	}
	return c.handle(ctx, csr.DeepCopy())
}

// recognizer is a kind of request the controller approves if the
// requestor has permission.
type recognizer struct {
	recognize      func(csr *certificatesv1.CertificateSigningRequest, req *x509.CertificateRequest) bool
	permission     authorizationv1.ResourceAttributes
	successMessage string
}

// recognizers are upstream's, in its order: a node's request for itself
// first.
func recognizers() []recognizer {
	permission := func(subresource string) authorizationv1.ResourceAttributes {
		return authorizationv1.ResourceAttributes{Group: "certificates.k8s.io", Resource: "certificatesigningrequests",
			Verb: "create", Subresource: subresource, Version: "*"}
	}
	return []recognizer{
		{recognize: isSelfNodeClientCert, permission: permission("selfnodeclient"),
			successMessage: "Auto approving self kubelet client certificate after SubjectAccessReview."},
		{recognize: isNodeClientCert, permission: permission("nodeclient"),
			successMessage: "Auto approving kubelet client certificate after SubjectAccessReview."},
	}
}

// handle approves csr if a recognizer knows it and the requestor has its
// permission; if one knows it and none allows it, it is tried again later.
func (c *Controller) handle(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) error {
	if approved, denied := approval(csr); approved || denied {
		return nil
	}
	req, err := certificates.ParseCSR(csr.Spec.Request)
	if err != nil {
		return fmt.Errorf("unable to parse csr %q: %w", csr.Name, err)
	}
	var tried []string
	for _, r := range recognizers() {
		if !r.recognize(csr, req) {
			continue
		}
		tried = append(tried, r.permission.Subresource)
		allowed, err := c.authorize(ctx, csr, r.permission)
		if err != nil {
			return err
		}
		if allowed {
			return c.approve(ctx, csr, r.successMessage)
		}
	}
	if len(tried) == 0 {
		return nil
	}
	return &controller.Later{After: c.backoff.When(csr.Name),
		Reason: fmt.Sprintf("recognized csr %q as %v but subject access review was not approved", csr.Name, tried)}
}

// authorize asks whether the requestor of csr may do what attrs says.
func (c *Controller) authorize(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, attrs authorizationv1.ResourceAttributes) (bool, error) {
	extra := make(map[string]authorizationv1.ExtraValue, len(csr.Spec.Extra))
	for k, v := range csr.Spec.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar, err := c.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{User: csr.Spec.Username, UID: csr.Spec.UID, Groups: csr.Spec.Groups,
			Extra: extra, ResourceAttributes: &attrs},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("subject access review for csr %q: %w", csr.Name, err)
	}
	return sar.Status.Allowed, nil
}

// approve adds the Approved condition (its times are the server's).
func (c *Controller) approve(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, message string) error {
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "AutoApproved", Message: message,
	})
	if _, err := c.client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("error updating approval for csr: %w", err)
	}
	return nil
}

// approval reports whether csr has Approved and Denied conditions,
// whatever their status.
func approval(csr *certificatesv1.CertificateSigningRequest) (approved, denied bool) {
	for _, c := range csr.Status.Conditions {
		approved = approved || c.Type == certificatesv1.CertificateApproved
		denied = denied || c.Type == certificatesv1.CertificateDenied
	}
	return approved, denied
}

// isNodeClientCert: a request the kubelet client signer would sign.
func isNodeClientCert(csr *certificatesv1.CertificateSigningRequest, req *x509.CertificateRequest) bool {
	return csr.Spec.SignerName == certificatesv1.KubeAPIServerClientKubeletSignerName &&
		certificates.ValidateKubeletClientCSR(req, csr.Spec.Usages) == nil
}

// isSelfNodeClientCert: such a request by the node it names.
func isSelfNodeClientCert(csr *certificatesv1.CertificateSigningRequest, req *x509.CertificateRequest) bool {
	return csr.Spec.Username == req.Subject.CommonName && isNodeClientCert(csr, req)
}
