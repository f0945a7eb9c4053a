// Package csrcleaner is kube-controller-manager's CertificateSigningRequest
// cleaner (csrcleaner): once an hour, and when it starts, it deletes the
// requests that are done with or forgotten:
//
//   - issued, and approved (lastUpdateTime) more than an hour ago;
//   - denied or failed more than an hour ago;
//   - with no condition, created more than 24 hours ago;
//   - approved and issued a certificate that has expired;
//   - approved more than 24 hours ago and not issued.
//
// Ages are read on the controller's clock (controllers.Config.Clock): a
// test steps a fake one past the hour to have the cleaner pass, and
// Server.WaitIdle waits for a pass that is due. A zero time is never old.
package csrcleaner

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	certificatesv1client "k8s.io/client-go/kubernetes/typed/certificates/v1"
	certificatesv1listers "k8s.io/client-go/listers/certificates/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/internal/controller"
)

// Upstream's period and ages.
const (
	pollingInterval    = time.Hour
	approvedExpiration = time.Hour
	deniedExpiration   = time.Hour
	pendingExpiration  = 24 * time.Hour
)

// Controller is the cleaner.
type Controller struct {
	controller.Parts
	client certificatesv1client.CertificateSigningRequestInterface
	csrs   certificatesv1listers.CertificateSigningRequestLister
	synced cache.InformerSynced
	clock  clock.WithTicker
	passes atomic.Uint64

	mu sync.Mutex
	// cleaning is set while a pass runs or is about to (the first one
	// from the start).
	cleaning bool
	// due is when the next pass is.
	due time.Time
}

// New returns the cleaner of cfg's server.
func New(cfg controllers.Config) (*Controller, error) {
	informer := cfg.Informers.Certificates().V1().CertificateSigningRequests()
	c := &Controller{client: cfg.Client.CertificatesV1().CertificateSigningRequests(), csrs: informer.Lister(),
		synced: informer.Informer().HasSynced, clock: cfg.Clock, cleaning: true}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	c.Name, c.Observer, c.Busy = string(controllers.CSRCleaner), controller.NewObserver(cfg.Revisions), c.busy
	// No handler: the cleaner only lists, but WaitIdle then knows its
	// cache has every request a pass should see.
	if err := c.Observer.Watch(certificatesv1.Resource("certificatesigningrequests"), informer.Informer(), cache.ResourceEventHandlerFuncs{}); err != nil {
		return nil, fmt.Errorf("watch certificatesigningrequests: %w", err)
	}
	return c, nil
}

// Run cleans once the cache has synced (upstream does not wait, and its
// first pass may see nothing), then every hour, until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	err := controller.Wait(ctx, func() error {
		if !c.synced() {
			return errors.New("certificatesigningrequests not synced")
		}
		return nil
	})
	if err != nil {
		return
	}
	for {
		c.clean(ctx)
		timer := c.next()
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C():
		}
		c.mu.Lock()
		c.cleaning = true
		c.mu.Unlock()
	}
}

// next schedules the next pass, an hour on, as upstream's period starts
// when a pass ends.
func (c *Controller) next() clock.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cleaning = false
	c.due = c.clock.Now().Add(pollingInterval)
	return c.clock.NewTimer(pollingInterval)
}

// busy returns why the cleaner is not idle: a pass runs or is due (a fake
// clock was stepped past it and the timer has yet to be seen).
func (c *Controller) busy() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.cleaning:
		return errors.New("cleaning")
	case !c.clock.Now().Before(c.due):
		return fmt.Errorf("a pass is due since %v", c.due)
	}
	return nil
}

// Finished counts the passes, each a round of work for WaitIdle.
func (c *Controller) Finished() uint64 { return c.passes.Load() }

// clean deletes the requests due for it, as the cache has them.
func (c *Controller) clean(ctx context.Context) {
	defer c.passes.Add(1)
	logger := klog.FromContext(ctx)
	csrs, err := c.csrs.List(labels.Everything())
	if err != nil {
		logger.Error(err, "Unable to list CSRs")
		return
	}
	now := c.clock.Now()
	for _, csr := range csrs {
		if !clean(logger, csr, now) {
			continue
		}
		err := c.client.Delete(ctx, csr.Name, metav1.DeleteOptions{})
		if ctx.Err() != nil {
			return // shutting down
		}
		if err != nil {
			logger.Error(fmt.Errorf("unable to delete CSR %q: %w", csr.Name, err), "Error while attempting to clean CSR", "csr", csr.Name)
		}
	}
}

// clean reports whether csr is due for deletion at now, logging why as
// upstream does.
func clean(logger klog.Logger, csr *certificatesv1.CertificateSigningRequest, now time.Time) bool {
	issued := len(csr.Status.Certificate) > 0
	for _, c := range csr.Status.Conditions {
		var why, key string
		var age time.Duration
		switch {
		case c.Type == certificatesv1.CertificateApproved && issued && olderThan(c.LastUpdateTime, approvedExpiration, now):
			why, key, age = "Cleaning CSR as it is more than approvedExpiration duration old and approved.", "approvedExpiration", approvedExpiration
		case c.Type == certificatesv1.CertificateDenied && olderThan(c.LastUpdateTime, deniedExpiration, now):
			why, key, age = "Cleaning CSR as it is more than deniedExpiration duration old and denied.", "deniedExpiration", deniedExpiration
		case c.Type == certificatesv1.CertificateFailed && olderThan(c.LastUpdateTime, deniedExpiration, now):
			why, key, age = "Cleaning CSR as it is more than deniedExpiration duration old and failed.", "deniedExpiration", deniedExpiration
		case c.Type == certificatesv1.CertificateApproved && issued && expired(csr.Status.Certificate, now):
			logger.Info("Cleaning CSR as the associated certificate is expired.", "csr", csr.Name)
			return true
		case c.Type == certificatesv1.CertificateApproved && !issued && olderThan(c.LastUpdateTime, pendingExpiration, now):
			why, key, age = "Cleaning CSR as it is approved but unissued for more than pendingExpiration duration.", "pendingExpiration", pendingExpiration
		default:
			continue
		}
		logger.Info(why, "csr", csr.Name, key, age)
		return true
	}
	if len(csr.Status.Conditions) == 0 && olderThan(csr.CreationTimestamp, pendingExpiration, now) {
		logger.Info("Cleaning CSR as it is more than pendingExpiration duration old and unhandled.", "csr", csr.Name, "pendingExpiration", pendingExpiration)
		return true
	}
	return false
}

// olderThan reports whether t is set and more than d before now.
func olderThan(t metav1.Time, d time.Duration, now time.Time) bool {
	return !t.IsZero() && now.Sub(t.Time) > d
}

// expired reports whether the first certificate of certPEM has expired
// at now; one that cannot be read has not.
func expired(certPEM []byte, now time.Time) bool {
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return false
	}
	certs, err := x509.ParseCertificates(block.Bytes)
	if err != nil || len(certs) == 0 {
		return false
	}
	return now.After(certs[0].NotAfter)
}
