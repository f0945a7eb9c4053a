package csrapproving_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

const (
	selfNodeClient = "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient"
	nodeClient     = "system:certificates.k8s.io:certificatesigningrequests:nodeclient"
	// nodeBootstrapper may create certificate signing requests.
	nodeBootstrapper = "system:node-bootstrapper"
)

var clientUsages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}

func start(t *testing.T) (*apiserver.Server, kubernetes.Interface) {
	t.Helper()
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{
		Controllers: []controllers.Name{controllers.CSRSigning, controllers.CSRApproving, controllers.CSRCleaner},
		Nodes:       []controllers.Node{},
	}))
	c, err := srv.Clientset()
	require.NoError(t, err)
	return srv, c
}

// bind binds the ClusterRole role to group, as kubeadm binds the
// approval roles.
func bind(t *testing.T, c kubernetes.Interface, role, group string) {
	t.Helper()
	_, err := c.RbacV1().ClusterRoleBindings().Create(t.Context(), &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "test-"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: group}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// request creates, as c's user, the request name for signer with usages
// and a subject of cn in orgs, and returns its key.
func request(t *testing.T, c kubernetes.Interface, name, signer, cn string, orgs []string, usages ...certificatesv1.KeyUsage) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn, Organization: orgs}}, key)
	require.NoError(t, err)
	_, err = c.CertificatesV1().CertificateSigningRequests().Create(t.Context(), &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certificatesv1.CertificateSigningRequestSpec{SignerName: signer, Usages: usages,
			Request: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})},
	}, metav1.CreateOptions{})
	require.NoError(t, err, name)
	return key
}

func get(t *testing.T, c kubernetes.Interface, name string) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	csr, err := c.CertificatesV1().CertificateSigningRequests().Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err, name)
	return csr
}

// autoApproved is the condition the controller adds with message.
func autoApproved(message string) []certificatesv1.CertificateSigningRequestCondition {
	return []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue,
		Reason: "AutoApproved", Message: message}}
}

// ignoreTimes leaves the conditions' times (the server's) out.
var ignoreTimes = cmpopts.IgnoreFields(certificatesv1.CertificateSigningRequestCondition{}, "LastUpdateTime", "LastTransitionTime")

// whoami authenticates with the certificate issued to the request name
// and key.
func whoami(t *testing.T, srv *apiserver.Server, c kubernetes.Interface, name string, key *ecdsa.PrivateKey) authenticationv1.UserInfo {
	t.Helper()
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	cfg := rest.AnonymousClientConfig(srv.RESTConfig())
	cfg.CertData, cfg.KeyData = get(t, c, name).Status.Certificate, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	user, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	review, err := user.AuthenticationV1().SelfSubjectReviews().Create(t.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	require.NoError(t, err)
	return review.Status.UserInfo
}

// A node that may create selfnodeclient requests has its own client
// certificate request approved (selfnodeclient's message), then signed:
// the certificate authenticates the node.
func TestApproveSelfNodeClient(t *testing.T) {
	t.Parallel()
	srv, admin := start(t)
	bind(t, admin, nodeBootstrapper, "system:nodes")
	bind(t, admin, selfNodeClient, "system:nodes")
	node := apiservertest.ClientsetFor(t, srv, "system:node:n1", "system:nodes")
	key := request(t, node, "n1", certificatesv1.KubeAPIServerClientKubeletSignerName, "system:node:n1", []string{"system:nodes"}, clientUsages...)
	apiservertest.WaitIdle(t, srv)

	csr := get(t, admin, "n1")
	assert.Empty(t, cmp.Diff(autoApproved("Auto approving self kubelet client certificate after SubjectAccessReview."), csr.Status.Conditions, ignoreTimes))
	require.NotEmpty(t, csr.Status.Certificate, "signed once approved")
	got := whoami(t, srv, admin, "n1", key)
	assert.Equal(t, "system:node:n1", got.Username)
	assert.Equal(t, []string{"system:nodes", "system:authenticated"}, got.Groups)
}

// A requestor that may create nodeclient requests (a bootstrap token, as
// kubeadm binds it) has any node's client certificate request approved,
// with nodeclient's message.
func TestApproveNodeClient(t *testing.T) {
	t.Parallel()
	srv, admin := start(t)
	const bootstrappers = "system:bootstrappers:kubeadm:default-node-token"
	bind(t, admin, nodeBootstrapper, bootstrappers)
	bind(t, admin, nodeClient, bootstrappers)
	bootstrap := apiservertest.ClientsetFor(t, srv, "system:bootstrap:abcdef", "system:bootstrappers", bootstrappers)
	request(t, bootstrap, "n2", certificatesv1.KubeAPIServerClientKubeletSignerName, "system:node:n2", []string{"system:nodes"},
		certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageClientAuth)
	apiservertest.WaitIdle(t, srv)

	csr := get(t, admin, "n2")
	assert.Empty(t, cmp.Diff(autoApproved("Auto approving kubelet client certificate after SubjectAccessReview."), csr.Status.Conditions, ignoreTimes))
	assert.NotEmpty(t, csr.Status.Certificate)
}

// Without the permission a node's request stays pending; it is retried
// with backoff, so granting the permission later approves it. A request
// denied meanwhile is left alone.
func TestApproveOnceAllowed(t *testing.T) {
	t.Parallel()
	srv, admin := start(t)
	bind(t, admin, nodeBootstrapper, "system:nodes")
	node := apiservertest.ClientsetFor(t, srv, "system:node:n1", "system:nodes")
	request(t, node, "n1", certificatesv1.KubeAPIServerClientKubeletSignerName, "system:node:n1", []string{"system:nodes"}, clientUsages...)
	request(t, node, "denied", certificatesv1.KubeAPIServerClientKubeletSignerName, "system:node:n1", []string{"system:nodes"}, clientUsages...)
	apiservertest.WaitIdle(t, srv)
	assert.Empty(t, get(t, admin, "n1").Status.Conditions, "not allowed: pending")
	csr := get(t, admin, "denied")
	csr.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateDenied,
		Status: corev1.ConditionTrue, Reason: "KubectlDeny", Message: "denied"}}
	_, err := admin.CertificatesV1().CertificateSigningRequests().UpdateApproval(t.Context(), "denied", csr, metav1.UpdateOptions{})
	require.NoError(t, err)

	w, err := admin.CertificatesV1().CertificateSigningRequests().Watch(t.Context(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", "n1").String()})
	require.NoError(t, err)
	defer w.Stop()
	bind(t, admin, selfNodeClient, "system:nodes")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for {
		select {
		case <-ctx.Done():
			t.Fatalf("not approved once allowed: %+v", get(t, admin, "n1").Status.Conditions)
		case ev := <-w.ResultChan():
			if csr, ok := ev.Object.(*certificatesv1.CertificateSigningRequest); ok && ev.Type == watch.Modified && len(csr.Status.Conditions) > 0 {
				assert.Empty(t, cmp.Diff(autoApproved("Auto approving self kubelet client certificate after SubjectAccessReview."), csr.Status.Conditions, ignoreTimes))
				apiservertest.WaitIdle(t, srv)
				denied := get(t, admin, "denied")
				assert.Len(t, denied.Status.Conditions, 1)
				assert.Empty(t, denied.Status.Certificate)
				return
			}
		}
	}
}

// Only kubelet client requests the kubelet client signer would sign are
// approved, a node's own only with selfnodeclient: another signer, other
// usages, a subject outside system:nodes, or another node's name stay
// pending.
func TestNotApproved(t *testing.T) {
	t.Parallel()
	srv, admin := start(t)
	bind(t, admin, nodeBootstrapper, "system:nodes")
	bind(t, admin, selfNodeClient, "system:nodes")
	node := apiservertest.ClientsetFor(t, srv, "system:node:n1", "system:nodes")
	nodes := []string{"system:nodes"}
	request(t, node, "apiserver-client", certificatesv1.KubeAPIServerClientSignerName, "system:node:n1", nodes, clientUsages...)
	request(t, node, "server-auth", certificatesv1.KubeAPIServerClientKubeletSignerName, "system:node:n1", nodes,
		certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth)
	request(t, node, "other-org", certificatesv1.KubeAPIServerClientKubeletSignerName, "system:node:n1", []string{"other"}, clientUsages...)
	request(t, node, "other-node", certificatesv1.KubeAPIServerClientKubeletSignerName, "system:node:n2", nodes, clientUsages...)
	apiservertest.WaitIdle(t, srv)

	for _, name := range []string{"apiserver-client", "server-auth", "other-org", "other-node"} {
		csr := get(t, admin, name)
		assert.Empty(t, csr.Status.Conditions, name)
		assert.Empty(t, csr.Status.Certificate, name)
	}
}
