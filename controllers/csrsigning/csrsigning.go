// Package csrsigning is kube-controller-manager's CertificateSigningRequest
// signing controller (csrsigning): the server's CA signs the approved
// requests of the four kubernetes.io signers kube-controller-manager runs,
// each in a loop of its own:
//
//   - kubernetes.io/kube-apiserver-client: any subject, for client auth;
//   - kubernetes.io/kube-apiserver-client-kubelet: system:node:<name> in
//     system:nodes, for client auth, no alternative names;
//   - kubernetes.io/kubelet-serving: system:node:<name> in system:nodes,
//     for server auth, with DNS or IP names;
//   - kubernetes.io/legacy-unknown: anything (certificates/v1 refuses to
//     create such requests; older ones are still signed).
//
// A request its signer refuses gets a Failed condition (reason
// SignerValidationFailure, the refusal as message) and no certificate; one
// already Failed, denied, not approved, or of another signer is left alone.
// A certificate is the request's subject and names with the usages asked
// for, valid from 5 minutes before the controller's clock
// (controllers.Config.Clock) for spec.expirationSeconds within [10 minutes,
// a year] (a year if not asked for; 5 minutes less from 8 hours up) and
// never past the CA. The server's authenticator accepts the client
// certificates: the common name is the user, the organizations its groups.
//
// Without a signer (controllers.Config.Signer nil) nothing is signed, as
// kube-controller-manager skips the controller without a signing CA.
package csrsigning

import (
	"context"
	"crypto/x509"
	"fmt"
	"sync"

	certificatesv1 "k8s.io/api/certificates/v1"
	certificatesv1beta1 "k8s.io/api/certificates/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	certificatesv1listers "k8s.io/client-go/listers/certificates/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/internal/certificates"
	"github.com/kubeembed/apiserver/internal/controller"
)

// workers is the number of workers of each signer's loop, fixed in
// kube-controller-manager.
const workers = 5

// Controller is the signing controller.
type Controller struct {
	controller.Parts
	client kubernetes.Interface
	csrs   certificatesv1listers.CertificateSigningRequestLister
	ca     controllers.CertificateSigner
	clock  clock.PassiveClock
	// loops are the signers' loops by signer name.
	loops map[string]*loop
}

// loop is one signer's loop, as kube-controller-manager runs one
// certificate controller per signer.
type loop struct {
	signerName string
	// validate returns why the signer refuses a request, or nil.
	validate func(req *x509.CertificateRequest, usages []certificatesv1.KeyUsage) error
	queue    *controller.Queue
}

// New returns the signing controller of cfg's server, signing with
// cfg.Signer.
func New(cfg controllers.Config) (*Controller, error) {
	c := &Controller{client: cfg.Client, ca: cfg.Signer, clock: cfg.Clock, loops: map[string]*loop{}}
	c.Name, c.Observer = string(controllers.CSRSigning), controller.NewObserver(cfg.Revisions)
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	if cfg.Signer == nil {
		return c, nil
	}
	for name, validate := range map[string]func(*x509.CertificateRequest, []certificatesv1.KeyUsage) error{
		certificatesv1.KubeletServingSignerName:             certificates.ValidateKubeletServingCSR,
		certificatesv1.KubeAPIServerClientKubeletSignerName: certificates.ValidateKubeletClientCSR,
		certificatesv1.KubeAPIServerClientSignerName:        validateAPIServerClient,
		certificatesv1beta1.LegacyUnknownSignerName:         validateLegacyUnknown,
	} {
		// Each queue is named "certificate", as each of
		// kube-controller-manager's certificate controllers names its
		// own: their workqueue metrics add up under one name.
		l := &loop{signerName: name, validate: validate, queue: controller.NewQueue("certificate", cfg.QueueMetrics)}
		c.loops[name] = l
		c.Queues = append(c.Queues, l.queue)
	}
	informer := cfg.Informers.Certificates().V1().CertificateSigningRequests()
	c.csrs = informer.Lister()
	// A request goes only to its own signer's loop (the others would
	// ignore it: spec.signerName is immutable), and not when deleted.
	enqueue := func(obj any) {
		if csr, ok := obj.(*certificatesv1.CertificateSigningRequest); ok && c.loops[csr.Spec.SignerName] != nil {
			c.loops[csr.Spec.SignerName].queue.Add(csr.Name)
		}
	}
	err := c.Observer.Watch(certificatesv1.Resource("certificatesigningrequests"), informer.Informer(),
		cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }})
	if err != nil {
		return nil, fmt.Errorf("watch certificatesigningrequests: %w", err)
	}
	return c, nil
}

// Run signs requests until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, l := range c.loops {
		wg.Go(func() {
			l.queue.Run(ctx, workers, func(ctx context.Context, name string) error { return c.sync(ctx, l, name) })
		})
	}
	wg.Wait()
	<-ctx.Done() // without a signer there are no loops
}

// sync handles the request name for l's signer, unless it is gone or
// already has its certificate.
func (c *Controller) sync(ctx context.Context, l *loop, name string) error {
	csr, err := c.csrs.Get(name)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("get csr %q: %w", name, err)
	case len(csr.Status.Certificate) > 0:
		return nil
	}
	return c.handle(ctx, l, csr.DeepCopy())
}

// handle signs csr, approved for l's signer, or marks it Failed if the
// signer refuses it.
func (c *Controller) handle(ctx context.Context, l *loop, csr *certificatesv1.CertificateSigningRequest) error {
	if !approved(csr) || hasTrueCondition(csr, certificatesv1.CertificateFailed) || csr.Spec.SignerName != l.signerName {
		return nil
	}
	req, err := certificates.ParseCSR(csr.Spec.Request)
	if err != nil {
		return fmt.Errorf("unable to parse csr %q: %w", csr.Name, err)
	}
	if err := l.validate(req, csr.Spec.Usages); err != nil {
		csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateFailed, Status: corev1.ConditionTrue,
			Reason: "SignerValidationFailure", Message: err.Error(), LastUpdateTime: metav1.NewTime(c.clock.Now()),
		})
		if _, err := c.client.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, csr, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("error adding failure condition for csr: %w", err)
		}
		return nil
	}
	cert, err := c.sign(req, csr.Spec.Usages, csr.Spec.ExpirationSeconds)
	if err != nil {
		return fmt.Errorf("error auto signing csr: %w", err)
	}
	csr.Status.Certificate = cert
	if _, err := c.client.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, csr, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("error updating signature for csr: %w", err)
	}
	return nil
}

// approved reports whether csr has an Approved condition and no Denied
// one, whatever their status, as kube-controller-manager reads them.
func approved(csr *certificatesv1.CertificateSigningRequest) bool {
	var approved, denied bool
	for _, c := range csr.Status.Conditions {
		approved = approved || c.Type == certificatesv1.CertificateApproved
		denied = denied || c.Type == certificatesv1.CertificateDenied
	}
	return approved && !denied
}

// hasTrueCondition reports whether csr has a condition of type t whose
// status is True or empty.
func hasTrueCondition(csr *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType) bool {
	for _, c := range csr.Status.Conditions {
		if c.Type == t && (c.Status == "" || c.Status == corev1.ConditionTrue) {
			return true
		}
	}
	return false
}
