package apiserver_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubeembed/apiserver/testing/apiservertest"
)

func requestToken(t *testing.T, c kubernetes.Interface, ns, sa string, spec authenticationv1.TokenRequestSpec) (*authenticationv1.TokenRequest, error) {
	t.Helper()
	return c.CoreV1().ServiceAccounts(ns).CreateToken(t.Context(), sa, &authenticationv1.TokenRequest{Spec: spec}, metav1.CreateOptions{})
}

func review(t *testing.T, c kubernetes.Interface, token string, audiences ...string) authenticationv1.TokenReviewStatus {
	t.Helper()
	tr, err := c.AuthenticationV1().TokenReviews().Create(t.Context(), &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: audiences}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return tr.Status
}

// A TokenRequest's token authenticates as its service account, with
// kube-apiserver's user, groups and extra, until the account is deleted.
func TestTokenRequest(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	c := clientset(t, srv)
	tr, err := requestToken(t, c, "default", "default", authenticationv1.TokenRequestSpec{})
	require.NoError(t, err)
	assert.EqualValues(t, 3600, *tr.Spec.ExpirationSeconds, "default expiry")
	assert.Equal(t, []string{"https://kubernetes.default.svc.cluster.local"}, tr.Spec.Audiences, "the API audiences by default")
	assert.WithinDuration(t, tr.CreationTimestamp.Add(3600e9), tr.Status.ExpirationTimestamp.Time, 0)
	// The expiry is defaulted on decode, as kube-apiserver's scheme does, so
	// the request's fields own it (the audiences come later, from the REST).
	require.Len(t, tr.ManagedFields, 1)
	assert.JSONEq(t, `{"f:spec":{"f:expirationSeconds":{}}}`, string(tr.ManagedFields[0].FieldsV1.Raw))

	st := review(t, c, tr.Status.Token)
	require.True(t, st.Authenticated, st.Error)
	sa, err := c.CoreV1().ServiceAccounts("default").Get(t.Context(), "default", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "system:serviceaccount:default:default", st.User.Username)
	assert.Equal(t, string(sa.UID), st.User.UID)
	assert.Equal(t, []string{"system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"}, st.User.Groups)
	assert.Regexp(t, `^JTI=[0-9a-f-]{36}$`, st.User.Extra["authentication.kubernetes.io/credential-id"][0])
	assert.Equal(t, []string{"https://kubernetes.default.svc.cluster.local"}, st.Audiences)

	other := review(t, c, tr.Status.Token, "vault")
	assert.False(t, other.Authenticated)
	assert.Equal(t, `token audiences ["https://kubernetes.default.svc.cluster.local"] is invalid for the target audiences ["vault"]`, other.Error)

	// The token is the service account's on requests too.
	cfg := rest.AnonymousClientConfig(srv.RESTConfig())
	cfg.BearerToken = tr.Status.Token
	_, err = kubernetes.NewForConfigOrDie(cfg).CoreV1().Secrets("default").List(t.Context(), metav1.ListOptions{})
	require.True(t, apierrors.IsForbidden(err), "authenticated, then not authorized: %v", err)
	assert.Contains(t, err.Error(), `User "system:serviceaccount:default:default" cannot list resource "secrets"`)

	// Accounts are looked up in the server's informer first, as
	// kube-apiserver's --service-account-lookup does: a token dies when the
	// informer sees the deletion.
	require.NoError(t, c.CoreV1().ServiceAccounts("default").Delete(t.Context(), "default", metav1.DeleteOptions{}))
	var gone authenticationv1.TokenReviewStatus
	require.NoError(t, wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 30*time.Second, true,
		func(context.Context) (bool, error) {
			gone = review(t, c, tr.Status.Token)
			return !gone.Authenticated, nil
		}))
	assert.Equal(t, `serviceaccounts "default" not found`, gone.Error)
	_, err = kubernetes.NewForConfigOrDie(cfg).CoreV1().Secrets("default").List(t.Context(), metav1.ListOptions{})
	assert.True(t, apierrors.IsUnauthorized(err), "a deleted account's token: %v", err)
}

// A token bound to a pod carries it in its user's extra, and dies with it.
func TestTokenRequestBoundToPod(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	c := clientset(t, srv)
	pod, err := c.CoreV1().Pods("default").Create(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "app"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	tr, err := requestToken(t, c, "default", "default", authenticationv1.TokenRequestSpec{
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "app", UID: pod.UID}})
	require.NoError(t, err)
	st := review(t, c, tr.Status.Token)
	reviewed := time.Now()
	require.True(t, st.Authenticated, st.Error)
	assert.Equal(t, authenticationv1.ExtraValue{"app"}, st.User.Extra["authentication.kubernetes.io/pod-name"])
	assert.Equal(t, authenticationv1.ExtraValue{string(pod.UID)}, st.User.Extra["authentication.kubernetes.io/pod-uid"])

	unused, err := requestToken(t, c, "default", "default", authenticationv1.TokenRequestSpec{
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "app", UID: pod.UID}})
	require.NoError(t, err)

	require.NoError(t, c.CoreV1().Pods("default").Delete(t.Context(), "app", metav1.DeleteOptions{}))
	apiservertest.WaitIdle(t, srv) // its kubelet stops it and deletes it
	st = review(t, c, unused.Status.Token)
	assert.False(t, st.Authenticated)
	assert.Equal(t, "service account token has been invalidated", st.Error)
	// As on kube-apiserver, a token that authenticated is remembered for
	// 10 s: the pod's deletion shows after that (TestServiceAccountTokenSecret).
	if st := review(t, c, tr.Status.Token); time.Since(reviewed) < 9*time.Second {
		assert.True(t, st.Authenticated, "remembered")
	}
}

// Bad TokenRequests get kube-apiserver's statuses and messages.
func TestTokenRequestBadInput(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	c := clientset(t, srv)
	_, err := c.CoreV1().Pods("default").Create(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "other"},
		Spec: corev1.PodSpec{ServiceAccountName: "default", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.CoreV1().ServiceAccounts("default").Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	for _, tt := range []struct {
		name, sa string
		spec     authenticationv1.TokenRequestSpec
		code     int32
		message  string
	}{
		{"short", "default", authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(60))}, 422,
			`TokenRequest.authentication.k8s.io "" is invalid: spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes`},
		{"negative", "default", authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(-1))}, 422,
			`TokenRequest.authentication.k8s.io "" is invalid: spec.expirationSeconds: Invalid value: -1: may not specify a duration less than 10 minutes`},
		{"no account", "nobody", authenticationv1.TokenRequestSpec{}, 404, `serviceaccounts "nobody" not found`},
		{"missing pod", "default", authenticationv1.TokenRequestSpec{BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "ghost"}},
			404, `pods "ghost" not found`},
		{"other account's pod", "robot", authenticationv1.TokenRequestSpec{BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "other"}},
			400, `cannot bind token for serviceaccount "robot" to pod running with different serviceaccount name.`},
		{"wrong uid", "default", authenticationv1.TokenRequestSpec{BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "other", UID: "nope"}},
			409, `Operation cannot be fulfilled on Pod "other": the UID in the bound object reference (nope) does not match the UID in record. The object might have been deleted and then recreated`},
		{"unbindable", "default", authenticationv1.TokenRequestSpec{BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "ConfigMap", APIVersion: "v1", Name: "x"}},
			400, `cannot bind token to object of type /v1, Kind=ConfigMap`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := requestToken(t, c, "default", tt.sa, tt.spec)
			require.Error(t, err)
			st := statusOf(t, err)
			assert.Equal(t, tt.code, st.Code)
			assert.Equal(t, tt.message, st.Message)
		})
	}
}

// Tokens of another server, garbage and a token of this server whose claims
// were changed (its signature no longer matches) are 401 with
// kube-apiserver's body, never anonymous.
func TestForeignTokensAreUnauthorized(t *testing.T) {
	t.Parallel()
	srv, other := apiservertest.Start(t), apiservertest.Start(t)
	tr, err := requestToken(t, clientset(t, other), "default", "default", authenticationv1.TokenRequestSpec{})
	require.NoError(t, err)
	own, err := requestToken(t, clientset(t, srv), "default", "default", authenticationv1.TokenRequestSpec{})
	require.NoError(t, err)
	parts := strings.Split(own.Status.Token, ".")
	claims, err := base64.RawURLEncoding.DecodeString(parts[1])
	require.NoError(t, err)
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString(bytes.Replace(claims, []byte(`"default"`), []byte(`"kube-system"`), 1)) + "." + parts[2]
	for _, token := range []string{tr.Status.Token, "garbage", "a.b.c", tampered} {
		cfg := rest.AnonymousClientConfig(srv.RESTConfig())
		cfg.BearerToken = token
		_, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{})
		require.True(t, apierrors.IsUnauthorized(err), "%.20s: %v", token, err)
		assert.Equal(t, "Unauthorized", statusOf(t, err).Message)
	}
}

// The issuer discovery documents publish the key that signs the tokens.
func TestServiceAccountIssuerDiscovery(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	code, header, body := fetch(t, srv.RESTConfig(), "/.well-known/openid-configuration")
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, "application/json", header.Get("Content-Type"))
	var config map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &config))
	assert.Equal(t, "https://kubernetes.default.svc.cluster.local", config["issuer"])
	assert.Equal(t, srv.URL()+"/openid/v1/jwks", config["jwks_uri"])

	code, header, body = fetch(t, srv.RESTConfig(), "/openid/v1/jwks")
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, "application/jwk-set+json", header.Get("Content-Type"))
	var jwks struct{ Keys []map[string]string }
	require.NoError(t, json.Unmarshal([]byte(body), &jwks))
	require.Len(t, jwks.Keys, 1)
	tr, err := requestToken(t, clientset(t, srv), "default", "default", authenticationv1.TokenRequestSpec{})
	require.NoError(t, err)
	raw, err := base64.RawURLEncoding.DecodeString(strings.Split(tr.Status.Token, ".")[0])
	require.NoError(t, err)
	var header2 map[string]string
	require.NoError(t, json.Unmarshal(raw, &header2))
	assert.Equal(t, jwks.Keys[0]["kid"], header2["kid"])
	assert.Equal(t, "ES256", header2["alg"])
}

// kubectl create token works, and its token is the account's.
func TestKubectlCreateToken(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	token, stderr, err := kubectlFor(t, srv)("create", "token", "default", "--duration", "1h")
	require.NoError(t, err, stderr)
	st := review(t, clientset(t, srv), token)
	require.True(t, st.Authenticated, st.Error)
	assert.Equal(t, "system:serviceaccount:default:default", st.User.Username)
}

// A service account token Secret is filled by the token controller, its
// token authenticates while the secret holds it, and it goes with its
// account.
func TestServiceAccountTokenSecret(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	c := clientset(t, srv)
	_, err := c.CoreV1().ServiceAccounts("default").Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.CoreV1().Secrets("default").Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "robot-token", Annotations: map[string]string{corev1.ServiceAccountNameKey: "robot"}},
		Type:       corev1.SecretTypeServiceAccountToken}, metav1.CreateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)

	secret, err := c.CoreV1().Secrets("default").Get(t.Context(), "robot-token", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "default", string(secret.Data["namespace"]))
	assert.Equal(t, string(srv.RESTConfig().CAData), string(secret.Data["ca.crt"]))
	assert.NotEmpty(t, secret.Annotations[corev1.ServiceAccountUIDKey])
	st := review(t, c, string(secret.Data["token"]))
	require.True(t, st.Authenticated, st.Error)
	assert.Equal(t, "system:serviceaccount:default:robot", st.User.Username)

	require.NoError(t, c.CoreV1().ServiceAccounts("default").Delete(t.Context(), "robot", metav1.DeleteOptions{}))
	apiservertest.WaitIdle(t, srv)
	_, err = c.CoreV1().Secrets("default").Get(t.Context(), "robot-token", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "deleted with its account: %v", err)
	// kube-apiserver remembers a token that authenticated for 10 s (its
	// TokenSuccessCacheTTL): the token is refused once that has passed.
	deleted := time.Now()
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		tr, err := c.AuthenticationV1().TokenReviews().Create(t.Context(), &authenticationv1.TokenReview{
			Spec: authenticationv1.TokenReviewSpec{Token: string(secret.Data["token"])}}, metav1.CreateOptions{})
		if !assert.NoError(ct, err) {
			return
		}
		assert.False(ct, tr.Status.Authenticated)
		assert.Equal(ct, "Token has been invalidated", tr.Status.Error)
	}, 20*time.Second, 100*time.Millisecond)
	assert.Less(t, time.Since(deleted), 11*time.Second, "remembered no longer than kube-apiserver's 10 s")
}

// The admin token is audience agnostic, as kube-apiserver's token file:
// it authenticates for the server's API audiences (a review naming none
// gets them), not for another audience.
func TestAdminTokenAudiences(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	c := clientset(t, srv)
	token := srv.RESTConfig().BearerToken
	st := review(t, c, token)
	require.True(t, st.Authenticated, st.Error)
	assert.Equal(t, "kubeembed-admin", st.User.Username)
	tr, err := requestToken(t, c, "default", "default", authenticationv1.TokenRequestSpec{})
	require.NoError(t, err)
	api := review(t, c, tr.Status.Token).Audiences
	require.NotEmpty(t, api, "a token of the API audiences")
	assert.Equal(t, api, st.Audiences)
	assert.False(t, review(t, c, token, "vault").Authenticated, "not another audience's")
}

// A WebSocket client (a browser cannot set the Authorization header) gives
// its token as a subprotocol, base64url.bearer.authorization.k8s.io.<token>,
// which kube-apiserver reads as a bearer token: here the request lists
// ConfigMaps as the token's account.
func TestTokenInWebSocketProtocol(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	c := clientset(t, srv)
	tr, err := requestToken(t, c, "default", "default", authenticationv1.TokenRequestSpec{})
	require.NoError(t, err)
	cfg := srv.RESTConfig()
	tlsConfig, err := rest.TLSConfigFor(cfg)
	require.NoError(t, err)
	// HTTP/1.1: an upgrade is not an HTTP/2 request.
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig, TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}}
	get := func(token string) (int, string) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL()+"/api/v1/namespaces/default/configmaps", nil)
		require.NoError(t, err)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "websocket")
		req.Header.Set("Sec-WebSocket-Protocol", "base64url.bearer.authorization.k8s.io."+base64.RawURLEncoding.EncodeToString([]byte(token))+", v4.channel.k8s.io")
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}
	code, body := get(tr.Status.Token)
	assert.Equal(t, http.StatusForbidden, code)
	assert.Contains(t, body, `User \"system:serviceaccount:default:default\" cannot list`)
	code, _ = get("not-a-token")
	assert.Equal(t, http.StatusUnauthorized, code)
	code, _ = get(cfg.BearerToken)
	assert.Equal(t, http.StatusOK, code, "the admin")
}
