package envtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kubeembed/apiserver/internal/certs"
	"github.com/kubeembed/apiserver/internal/manifests"
)

// WebhookInstallOptions are the options for installing mutating and
// validating webhooks (envtest's). PrepWithoutInstalling fills in the
// LocalServing fields; the test's webhook server serves there.
type WebhookInstallOptions struct {
	// Paths are directories or files of webhook configurations
	// (admissionregistration.k8s.io/v1), such as config/webhook.
	Paths []string
	// MutatingWebhooks and ValidatingWebhooks are configurations to
	// install, with those read from Paths.
	MutatingWebhooks   []*admissionv1.MutatingWebhookConfiguration
	ValidatingWebhooks []*admissionv1.ValidatingWebhookConfiguration
	// IgnoreSchemeConvertible points the conversion of every CRD at the
	// webhook server, convertible in the Scheme or not.
	IgnoreSchemeConvertible bool
	// IgnoreErrorIfPathMissing skips missing Paths instead of failing.
	IgnoreErrorIfPathMissing bool
	// LocalServingHost is where the webhook server listens: default
	// 127.0.0.1.
	LocalServingHost string
	// LocalServingPort is its port: default a free one.
	LocalServingPort int
	// LocalServingCertDir holds the server's tls.crt and tls.key: default a
	// new temporary directory, removed by Cleanup.
	LocalServingCertDir string
	// LocalServingCAData is the CA that signed the serving certificate: the
	// caBundle of the installed configurations.
	LocalServingCAData []byte
	// LocalServingHostExternalName is the host the API server calls, if
	// not LocalServingHost.
	LocalServingHostExternalName string
	// MaxTime bounds the wait for the configurations to exist (default
	// 10 s); PollInterval is the interval of its checks (default 100 ms).
	MaxTime      time.Duration
	PollInterval time.Duration
}

// ModifyWebhookDefinitions gives every webhook the caBundle, and replaces a
// service reference by the URL of the local server with the service's path.
func (o *WebhookInstallOptions) ModifyWebhookDefinitions() error {
	hostPort, err := o.generateHostPort()
	if err != nil {
		return err
	}
	for _, c := range o.MutatingWebhooks {
		for i := range c.Webhooks {
			updateClientConfig(&c.Webhooks[i].ClientConfig, hostPort, o.LocalServingCAData)
		}
	}
	for _, c := range o.ValidatingWebhooks {
		for i := range c.Webhooks {
			updateClientConfig(&c.Webhooks[i].ClientConfig, hostPort, o.LocalServingCAData)
		}
	}
	return nil
}

func updateClientConfig(cc *admissionv1.WebhookClientConfig, hostPort string, ca []byte) {
	cc.CABundle = ca
	if cc.Service != nil && cc.Service.Path != nil {
		// envtest writes "https://host:port/" + path, a double slash the
		// API server's client cleans; this is the cleaned URL.
		u := "https://" + hostPort + "/" + trimSlash(*cc.Service.Path)
		cc.URL, cc.Service = &u, nil
	}
}

func trimSlash(p string) string {
	for len(p) > 0 && p[0] == '/' {
		p = p[1:]
	}
	return p
}

// generateHostPort picks the serving port if none is set and returns where
// the API server calls.
func (o *WebhookInstallOptions) generateHostPort() (string, error) {
	if o.LocalServingHost == "" {
		o.LocalServingHost = "127.0.0.1"
	}
	if o.LocalServingPort == 0 {
		port, err := suggestPort(o.LocalServingHost)
		if err != nil {
			return "", fmt.Errorf("unable to grab random port for serving webhooks on: %w", err)
		}
		o.LocalServingPort = port
	}
	host := o.LocalServingHostExternalName
	if host == "" {
		host = o.LocalServingHost
	}
	return net.JoinHostPort(host, strconv.Itoa(o.LocalServingPort)), nil
}

// suggested are the ports this process handed out: a webhook server binds
// its port itself, after Start, so the port is free only when chosen; at
// least two suites of one process never get the same one.
var suggested = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

func suggestPort(host string) (int, error) {
	suggested.Lock()
	defer suggested.Unlock()
	for range 100 {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		if err := l.Close(); err != nil {
			return 0, err
		}
		if !suggested.ports[port] {
			suggested.ports[port] = true
			return port, nil
		}
	}
	return 0, fmt.Errorf("no free port on %s after 100 tries", host)
}

// PrepWithoutInstalling generates the serving certificate, reads Paths and
// points the configurations at the local server, without installing them.
func (o *WebhookInstallOptions) PrepWithoutInstalling() error {
	if err := o.setupCA(); err != nil {
		return err
	}
	if err := parseWebhook(o); err != nil {
		return err
	}
	return o.ModifyWebhookDefinitions()
}

// setupCA issues a serving certificate for localhost and the serving
// hosts from a new CA, writes it to LocalServingCertDir as tls.crt and
// tls.key, and sets LocalServingCAData.
func (o *WebhookInstallOptions) setupCA() error {
	ca, err := certs.NewCA("envtest-webhooks")
	if err != nil {
		return fmt.Errorf("unable to set up webhook CA: %w", err)
	}
	if o.LocalServingHost == "" {
		o.LocalServingHost = "127.0.0.1"
	}
	hosts := []string{"localhost", o.LocalServingHost}
	if o.LocalServingHostExternalName != "" {
		hosts = append(hosts, o.LocalServingHostExternalName)
	}
	leaf, err := ca.Serving(hosts...)
	if err != nil {
		return fmt.Errorf("unable to set up webhook serving certs: %w", err)
	}
	dir, err := os.MkdirTemp("", "envtest-serving-certs-")
	if err != nil {
		return fmt.Errorf("unable to create directory for webhook serving certs: %w", err)
	}
	o.LocalServingCertDir = dir
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), leaf.CertPEM, 0o640); err != nil {
		return fmt.Errorf("unable to write webhook serving cert to disk: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), leaf.KeyPEM, 0o640); err != nil {
		return fmt.Errorf("unable to write webhook serving key to disk: %w", err)
	}
	o.LocalServingCAData = ca.CertPEM
	return nil
}

// Install creates (or updates) the configurations and waits until they
// exist, preparing them first if PrepWithoutInstalling was not called.
func (o *WebhookInstallOptions) Install(config *rest.Config) error {
	defaultWebhookOptions(o)
	if len(o.LocalServingCAData) == 0 {
		if err := o.PrepWithoutInstalling(); err != nil {
			return err
		}
	}
	c, err := webhookClient(config)
	if err != nil {
		return err
	}
	for _, h := range configurationObjects(o.MutatingWebhooks, o.ValidatingWebhooks) {
		if err := ensureCreated(c, h); err != nil {
			return err
		}
	}
	return WaitForWebhooks(config, o.MutatingWebhooks, o.ValidatingWebhooks, *o)
}

// webhookClient is a client of webhook configurations whose REST mapping is
// known: it needs no discovery requests, as a default client does.
func webhookClient(config *rest.Config) (client.Client, error) {
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{admissionv1.SchemeGroupVersion})
	for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
		mapper.Add(admissionv1.SchemeGroupVersion.WithKind(kind), meta.RESTScopeRoot)
	}
	return client.New(config, client.Options{Mapper: mapper})
}

func configurationObjects(mutating []*admissionv1.MutatingWebhookConfiguration, validating []*admissionv1.ValidatingWebhookConfiguration) []client.Object {
	var out []client.Object
	for _, h := range mutating {
		out = append(out, h)
	}
	for _, h := range validating {
		out = append(out, h)
	}
	return out
}

func defaultWebhookOptions(o *WebhookInstallOptions) {
	if o.MaxTime == 0 {
		o.MaxTime = defaultMaxWait
	}
	if o.PollInterval == 0 {
		o.PollInterval = defaultPollInterval
	}
}

// ensureCreated creates obj, or updates it if it exists.
func ensureCreated(c client.Client, obj client.Object) error {
	ctx := context.Background()
	existing := obj.DeepCopyObject().(client.Object)
	err := c.Get(ctx, client.ObjectKeyFromObject(obj), existing)
	switch {
	case apierrors.IsNotFound(err):
		return c.Create(ctx, obj)
	case err != nil:
		return err
	default:
		obj.SetResourceVersion(existing.GetResourceVersion())
		return c.Update(ctx, obj)
	}
}

// Cleanup removes LocalServingCertDir.
func (o *WebhookInstallOptions) Cleanup() error {
	if o.LocalServingCertDir == "" {
		return nil
	}
	return os.RemoveAll(o.LocalServingCertDir)
}

// WaitForWebhooks waits until every configuration can be read from the
// API server, checking every options.PollInterval for at most
// options.MaxTime.
func WaitForWebhooks(config *rest.Config, mutating []*admissionv1.MutatingWebhookConfiguration,
	validating []*admissionv1.ValidatingWebhookConfiguration, options WebhookInstallOptions) error {
	defaultWebhookOptions(&options)
	c, err := webhookClient(config)
	if err != nil {
		return err
	}
	var waiting []client.Object
	for _, h := range configurationObjects(mutating, validating) {
		waiting = append(waiting, h.DeepCopyObject().(client.Object))
	}
	return wait.PollUntilContextTimeout(context.Background(), options.PollInterval, options.MaxTime, true, func(ctx context.Context) (bool, error) {
		for len(waiting) > 0 {
			err := c.Get(ctx, client.ObjectKeyFromObject(waiting[0]), waiting[0])
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			if err != nil {
				return false, err
			}
			waiting = waiting[1:]
		}
		return true, nil
	})
}

// parseWebhook appends the configurations of options.Paths.
func parseWebhook(options *WebhookInstallOptions) error {
	for _, path := range options.Paths {
		files, err := manifests.Files(path)
		if os.IsNotExist(err) && options.IgnoreErrorIfPathMissing {
			continue
		}
		if err != nil {
			return err
		}
		for _, f := range files {
			if err := readWebhooks(f, options); err != nil {
				return err
			}
		}
	}
	return nil
}

// readWebhooks appends the webhook configurations of a file; other kinds
// are skipped, and only admissionregistration.k8s.io/v1 is read.
func readWebhooks(file string, options *WebhookInstallOptions) error {
	docs, err := manifests.Read(file)
	if err != nil {
		return err
	}
	for _, doc := range docs {
		var meta metav1.PartialObjectMetadata
		if err := yaml.Unmarshal(doc.Raw, &meta); err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		if meta.Kind != "MutatingWebhookConfiguration" && meta.Kind != "ValidatingWebhookConfiguration" {
			continue
		}
		if meta.APIVersion != admissionv1.SchemeGroupVersion.String() {
			return fmt.Errorf("only v1 is supported right now for %s (name: %s)", meta.Kind, meta.Name)
		}
		if meta.Kind == "MutatingWebhookConfiguration" {
			h := &admissionv1.MutatingWebhookConfiguration{}
			if err := yaml.Unmarshal(doc.Raw, h); err != nil {
				return fmt.Errorf("%s: %w", file, err)
			}
			options.MutatingWebhooks = append(options.MutatingWebhooks, h)
			continue
		}
		h := &admissionv1.ValidatingWebhookConfiguration{}
		if err := yaml.Unmarshal(doc.Raw, h); err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		options.ValidatingWebhooks = append(options.ValidatingWebhooks, h)
	}
	return nil
}
