// Package serviceaccounttoken is the service account token controller, as
// kube-controller-manager runs it: a Secret of type
// kubernetes.io/service-account-token naming a service account gets its
// token, ca.crt and namespace (and the account's UID annotation); one whose
// account is gone (or has another UID) is deleted, with the account's.
package serviceaccounttoken

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/internal/controller"
)

// Controller is the service account token controller.
type Controller struct {
	controller.Parts
	client  kubernetes.Interface
	secrets corev1listers.SecretLister
	tokens  controllers.LegacyTokenIssuer
	rootCA  []byte
	queue   *controller.Queue
}

// New returns the token controller of cfg's server.
func New(cfg controllers.Config) (*Controller, error) {
	secrets := cfg.Informers.Core().V1().Secrets()
	c := &Controller{client: cfg.Client, secrets: secrets.Lister(), tokens: cfg.LegacyTokens, rootCA: cfg.RootCA,
		queue: controller.NewQueue("token_secrets", cfg.QueueMetrics)}
	c.Name, c.Observer, c.Queues = string(controllers.ServiceAccountToken), controller.NewObserver(cfg.Revisions), []*controller.Queue{c.queue}
	secret := func(obj any) {
		if s, ok := obj.(*corev1.Secret); ok && s.Type == corev1.SecretTypeServiceAccountToken {
			c.queue.Add(s.Namespace + "/" + s.Name)
		}
	}
	err := c.Observer.Watch(corev1.Resource("secrets"), secrets.Informer(),
		cache.ResourceEventHandlerFuncs{AddFunc: secret, UpdateFunc: func(_, o any) { secret(o) }})
	if err != nil {
		return nil, err
	}
	err = c.Observer.Watch(corev1.Resource("serviceaccounts"), cfg.Informers.Core().V1().ServiceAccounts().Informer(),
		cache.ResourceEventHandlerFuncs{DeleteFunc: c.accountDeleted})
	return c, err
}

// accountDeleted queues the account's token secrets, to be deleted.
func (c *Controller) accountDeleted(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	sa, ok := obj.(*corev1.ServiceAccount)
	if !ok {
		return
	}
	list, _ := c.secrets.Secrets(sa.Namespace).List(labels.Everything())
	for _, s := range list {
		if s.Type == corev1.SecretTypeServiceAccountToken && s.Annotations[corev1.ServiceAccountNameKey] == sa.Name {
			c.queue.Add(s.Namespace + "/" + s.Name)
		}
	}
}

// Run fills token secrets until ctx ends.
func (c *Controller) Run(ctx context.Context) { c.queue.Run(ctx, 1, c.sync) }

func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	secret, err := c.client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	sa, err := c.client.CoreV1().ServiceAccounts(ns).Get(ctx, secret.Annotations[corev1.ServiceAccountNameKey], metav1.GetOptions{})
	if apierrors.IsNotFound(err) || err == nil && !sameAccount(secret, sa) {
		return c.deleteSecret(ctx, secret)
	}
	if err != nil {
		return err
	}
	return c.fill(ctx, secret, sa)
}

// sameAccount: the secret names this account (by UID too, if it does).
func sameAccount(secret *corev1.Secret, sa *corev1.ServiceAccount) bool {
	uid := secret.Annotations[corev1.ServiceAccountUIDKey]
	return uid == "" || uid == string(sa.UID)
}

func (c *Controller) deleteSecret(ctx context.Context, secret *corev1.Secret) error {
	err := c.client.CoreV1().Secrets(secret.Namespace).Delete(ctx, secret.Name,
		metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &secret.UID}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// fill writes what the secret lacks: ca.crt, namespace, token.
func (c *Controller) fill(ctx context.Context, secret *corev1.Secret, sa *corev1.ServiceAccount) error {
	needCA := len(c.rootCA) > 0 && string(secret.Data[corev1.ServiceAccountRootCAKey]) != string(c.rootCA)
	needNamespace := string(secret.Data[corev1.ServiceAccountNamespaceKey]) != secret.Namespace
	needToken := len(secret.Data[corev1.ServiceAccountTokenKey]) == 0
	if !needCA && !needNamespace && !needToken {
		return nil
	}
	secret = secret.DeepCopy()
	if secret.Data == nil {
		secret.Data = map[string][]byte{}
	}
	if needCA {
		secret.Data[corev1.ServiceAccountRootCAKey] = c.rootCA
	}
	if needNamespace {
		secret.Data[corev1.ServiceAccountNamespaceKey] = []byte(secret.Namespace)
	}
	if needToken {
		token, err := c.tokens.IssueLegacyToken(sa, secret.Name)
		if err != nil {
			return fmt.Errorf("generate token for %s/%s: %w", secret.Namespace, secret.Name, err)
		}
		secret.Data[corev1.ServiceAccountTokenKey] = []byte(token)
	}
	if secret.Annotations == nil {
		secret.Annotations = map[string]string{}
	}
	secret.Annotations[corev1.ServiceAccountNameKey] = sa.Name
	secret.Annotations[corev1.ServiceAccountUIDKey] = string(sa.UID)
	_, err := c.client.CoreV1().Secrets(secret.Namespace).Update(ctx, secret, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil // changed since: its update event queues it again
	}
	return err
}
