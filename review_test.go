package apiserver_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// The review APIs answer with the server's own authenticator and
// authorizer, as webhook servers and `kubectl auth can-i` use them.
func TestReviewAPIs(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	c := clientset(t, srv)
	ctx := t.Context()

	tr, err := c.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: srv.RESTConfig().BearerToken}}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.True(t, tr.Status.Authenticated)
	assert.Equal(t, apiserver.AdminUser, tr.Status.User.Username)
	assert.Contains(t, tr.Status.User.Groups, "system:masters")

	tr, err = c.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: "not-a-token"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.False(t, tr.Status.Authenticated)
	assert.Empty(t, tr.Status.User.Username)

	_, err = c.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{}, metav1.CreateOptions{})
	assert.True(t, apierrors.IsBadRequest(err), "no token: %v", err)

	self, err := c.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, apiserver.AdminUser, self.Status.UserInfo.Username)

	ssar, err := c.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: "delete", Resource: "nodes"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.True(t, ssar.Status.Allowed, "system:masters may do anything")

	sar, err := c.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{User: "alice", ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: "get", Resource: "pods", Namespace: "default"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.False(t, sar.Status.Allowed)
	sar, err = c.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{User: "alice", Groups: []string{"system:authenticated"}, NonResourceAttributes: &authorizationv1.NonResourceAttributes{
			Verb: "get", Path: "/healthz"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.True(t, sar.Status.Allowed, "public information paths, by the bootstrap policy's system:public-info-viewer")

	_, err = c.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get"}}}, metav1.CreateOptions{})
	require.True(t, apierrors.IsInvalid(err), "%v", err)
	assert.Contains(t, err.Error(), "at least one of user or group must be specified")

	_, err = c.AuthorizationV1().LocalSubjectAccessReviews("default").Create(ctx, &authorizationv1.LocalSubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{User: "bob", ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: "get", Resource: "pods", Namespace: "other"}}}, metav1.CreateOptions{})
	require.True(t, apierrors.IsInvalid(err), "%v", err)
	assert.Contains(t, err.Error(), "must match metadata.namespace")

	rules, err := c.AuthorizationV1().SelfSubjectRulesReviews().Create(ctx, &authorizationv1.SelfSubjectRulesReview{
		Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: "default"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Contains(t, rules.Status.ResourceRules, authorizationv1.ResourceRule{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}},
		"cluster-admin's rule, bound to system:masters")
}

// Cluster trust bundles hold PEM certificates; anything else is refused.
func TestClusterTrustBundles(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	c := clientset(t, srv)
	_, err := c.CertificatesV1().ClusterTrustBundles().Create(t.Context(), &certificatesv1.ClusterTrustBundle{
		ObjectMeta: metav1.ObjectMeta{Name: "roots"},
		Spec:       certificatesv1.ClusterTrustBundleSpec{TrustBundle: string(srv.CACert())}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.CertificatesV1().ClusterTrustBundles().Create(t.Context(), &certificatesv1.ClusterTrustBundle{
		ObjectMeta: metav1.ObjectMeta{Name: "empty"}}, metav1.CreateOptions{})
	require.True(t, apierrors.IsInvalid(err), "%v", err)
	assert.Contains(t, err.Error(), "at least one trust anchor must be provided")
}

// A CSR's /approval writes only the Approved and Denied conditions, and
// /status writes everything else: the signer and the approver cannot
// overwrite each other.
func TestCSRApprovalAndStatus(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	csrs := clientset(t, srv).CertificatesV1().CertificateSigningRequests()
	ctx := t.Context()

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "alice"}}, key)
	require.NoError(t, err)
	csr, err := csrs.Create(ctx, &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "alice"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: "example.com/signer", Usages: []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, apiserver.AdminUser, csr.Spec.Username, "the requestor is who asked")

	condition := func(typ certificatesv1.RequestConditionType) certificatesv1.CertificateSigningRequestCondition {
		return certificatesv1.CertificateSigningRequestCondition{Type: typ, Status: corev1.ConditionTrue, Reason: "Test"}
	}
	types := func(c *certificatesv1.CertificateSigningRequest) (out []certificatesv1.RequestConditionType) {
		for _, cond := range c.Status.Conditions {
			out = append(out, cond.Type)
		}
		return out
	}

	// The status subresource does not approve.
	csr.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{condition(certificatesv1.CertificateApproved)}
	csr, err = csrs.UpdateStatus(ctx, csr, metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.Empty(t, types(csr))

	csr.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{
		condition(certificatesv1.CertificateApproved), condition(certificatesv1.CertificateDenied)}
	_, err = csrs.UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{})
	require.True(t, apierrors.IsInvalid(err), "%v", err)
	assert.Contains(t, err.Error(), "mutually exclusive")

	csr.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{condition(certificatesv1.CertificateApproved)}
	csr.Status.Certificate = []byte("ignored by /approval")
	csr, err = csrs.UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.Equal(t, []certificatesv1.RequestConditionType{certificatesv1.CertificateApproved}, types(csr))
	assert.Empty(t, csr.Status.Certificate)

	// The signer's status write keeps the approval it does not send.
	csr.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{condition(certificatesv1.CertificateFailed)}
	csr, err = csrs.UpdateStatus(ctx, csr, metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.ElementsMatch(t, []certificatesv1.RequestConditionType{certificatesv1.CertificateApproved, certificatesv1.CertificateFailed}, types(csr))
}
