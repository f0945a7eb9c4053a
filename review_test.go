package apiserver_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// The review APIs answer with the server's own authenticator and
// authorizer, as webhook servers and `kubectl auth can-i` use them.
func TestReviewAPIs(t *testing.T) {
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
		Spec: authorizationv1.SubjectAccessReviewSpec{User: "alice", NonResourceAttributes: &authorizationv1.NonResourceAttributes{
			Verb: "get", Path: "/healthz"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.True(t, sar.Status.Allowed, "public information paths")

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
	require.NotEmpty(t, rules.Status.ResourceRules)
	assert.Equal(t, []string{"*"}, rules.Status.ResourceRules[0].Verbs)
}

// Cluster trust bundles hold PEM certificates; anything else is refused.
func TestClusterTrustBundles(t *testing.T) {
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
