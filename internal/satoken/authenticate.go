package satoken

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
)

// leeway is the clock skew tolerated, go-jose's default as kube-apiserver
// uses it.
const leeway = time.Minute

// Getter looks up the objects a token names, as they are now.
type Getter interface {
	ServiceAccount(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error)
	Pod(ctx context.Context, namespace, name string) (*corev1.Pod, error)
	Secret(ctx context.Context, namespace, name string) (*corev1.Secret, error)
	Node(ctx context.Context, name string) (*corev1.Node, error)
}

// Authenticator authenticates the issuer's tokens as their service
// accounts, looking the bound objects up with get. Tokens it did not sign
// are not its to judge (not ok, no error).
func (i *Issuer) Authenticator(get Getter) authenticator.Token {
	return tokenFunc(func(ctx context.Context, token string) (*authenticator.Response, bool, error) {
		issuer, payload, err := i.verify(token)
		if errors.Is(err, errNotOurs) {
			return nil, false, nil
		}
		var bound claims
		var legacy legacyClaims
		if issuer == LegacyIssuer {
			err = json.Unmarshal(payload, &legacy)
		} else {
			err = json.Unmarshal(payload, &bound)
		}
		if err != nil {
			return nil, false, err
		}
		// As kube-apiserver: the audiences first, then the claims.
		auds, err := i.audiences(ctx, bound.Audience)
		if err != nil {
			return nil, false, err
		}
		var info *serviceaccount.ServiceAccountInfo
		if issuer == LegacyIssuer {
			info, err = validateLegacy(ctx, get, token, &legacy)
		} else {
			info, err = validate(ctx, get, &bound)
		}
		if err != nil {
			return nil, false, err
		}
		return &authenticator.Response{User: info.UserInfo(), Audiences: auds}, true, nil
	})
}

// validateLegacy accepts a secret-based token while its secret holds it and
// its service account is the one it names, with kube-apiserver's messages.
func validateLegacy(ctx context.Context, get Getter, token string, c *legacyClaims) (*serviceaccount.ServiceAccountInfo, error) {
	ns, name, err := serviceaccount.SplitUsername(c.Subject)
	switch {
	case c.Namespace == "" || c.SecretName == "" || c.ServiceAccountName == "" || c.ServiceAccountUID == "":
		return nil, errors.New("token claims are missing")
	case err != nil || ns != c.Namespace || name != c.ServiceAccountName:
		return nil, errors.New("sub claim is invalid")
	}
	secret, err := get.Secret(ctx, c.Namespace, c.SecretName)
	if err != nil || secret.DeletionTimestamp != nil {
		//lint:ignore ST1005 kube-apiserver's exact message
		return nil, errors.New("Token has been invalidated")
	}
	if subtle.ConstantTimeCompare(secret.Data[corev1.ServiceAccountTokenKey], []byte(token)) == 0 {
		//lint:ignore ST1005 kube-apiserver's exact message
		return nil, errors.New("Token does not match server's copy")
	}
	sa, err := get.ServiceAccount(ctx, c.Namespace, c.ServiceAccountName)
	switch {
	case err != nil:
		return nil, err
	case sa.DeletionTimestamp != nil:
		return nil, fmt.Errorf("ServiceAccount %s/%s has been deleted", c.Namespace, c.ServiceAccountName)
	case string(sa.UID) != c.ServiceAccountUID:
		return nil, fmt.Errorf("ServiceAccount UID (%s) does not match claim (%s)", sa.UID, c.ServiceAccountUID)
	}
	return &serviceaccount.ServiceAccountInfo{Name: sa.Name, Namespace: sa.Namespace, UID: string(sa.UID)}, nil
}

type tokenFunc func(ctx context.Context, token string) (*authenticator.Response, bool, error)

func (f tokenFunc) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	return f(ctx, token)
}

// audiences are the token's audiences the request accepts (the API's, or a
// TokenReview's), with kube-apiserver's error when there are none. A token
// without audiences (secret-based) has the API's.
func (i *Issuer) audiences(ctx context.Context, token []string) (authenticator.Audiences, error) {
	if len(token) == 0 {
		token = i.Audiences()
	}
	requested, ok := authenticator.AudiencesFrom(ctx)
	if !ok {
		requested = i.Audiences()
	}
	auds := authenticator.Audiences(token).Intersect(requested)
	if len(auds) == 0 {
		return nil, fmt.Errorf("token audiences %q is invalid for the target audiences %q", token, requested)
	}
	return auds, nil
}

// validate checks the token's times and that what it is bound to still
// exists with the UID it names, with kube-apiserver's messages.
func validate(ctx context.Context, get Getter, c *claims) (*serviceaccount.ServiceAccountInfo, error) {
	now := time.Now()
	switch {
	case now.Add(-leeway).After(time.Unix(c.Expiry, 0)):
		return nil, errors.New("service account token has expired")
	case now.Add(leeway).Before(time.Unix(c.NotBefore, 0)):
		return nil, errors.New("service account token is not valid yet")
	case now.Add(leeway).Before(time.Unix(c.IssuedAt, 0)):
		return nil, errors.New("service account token is issued in the future")
	}
	deletedBefore := now.Add(-leeway)
	k := c.Kubernetes
	sa, err := get.ServiceAccount(ctx, k.Namespace, k.ServiceAccount.Name)
	if err != nil {
		return nil, err
	}
	if string(sa.UID) != k.ServiceAccount.UID {
		return nil, fmt.Errorf("service account UID (%s) does not match claim (%s)", sa.UID, k.ServiceAccount.UID)
	}
	if gone(sa.DeletionTimestamp, deletedBefore) {
		return nil, fmt.Errorf("service account %s/%s has been deleted", k.Namespace, k.ServiceAccount.Name)
	}
	info := &serviceaccount.ServiceAccountInfo{Name: sa.Name, Namespace: sa.Namespace, UID: string(sa.UID), CredentialID: "JTI=" + c.ID}
	if c.ID == "" {
		info.CredentialID = ""
	}
	if err := validateBound(ctx, get, k, info, deletedBefore); err != nil {
		return nil, err
	}
	return info, nil
}

// validateBound checks the secret, pod or node the token is bound to.
func validateBound(ctx context.Context, get Getter, k kubeClaims, info *serviceaccount.ServiceAccountInfo, deletedBefore time.Time) error {
	if r := k.Secret; r != nil {
		s, err := get.Secret(ctx, k.Namespace, r.Name)
		if err := checkBound("secret", r, s, err, deletedBefore); err != nil {
			return err
		}
	}
	if r := k.Pod; r != nil {
		p, err := get.Pod(ctx, k.Namespace, r.Name)
		if err := checkBound("pod", r, p, err, deletedBefore); err != nil {
			return err
		}
		info.PodName, info.PodUID = r.Name, r.UID
		if k.Node != nil {
			info.NodeName, info.NodeUID = k.Node.Name, k.Node.UID
		}
		return nil
	}
	if r := k.Node; r != nil {
		n, err := get.Node(ctx, r.Name)
		if err := checkBound("node", r, n, err, deletedBefore); err != nil {
			return err
		}
		info.NodeName, info.NodeUID = r.Name, r.UID
	}
	return nil
}

// checkBound: the bound object (looked up with err) exists with the UID the
// token names and was not deleted longer than the leeway ago.
func checkBound(kind string, r *ref, obj metav1.Object, err error, deletedBefore time.Time) error {
	switch {
	case err != nil:
		return errors.New("service account token has been invalidated")
	case string(obj.GetUID()) != r.UID:
		return fmt.Errorf("%s UID (%s) does not match service account %s ref claim (%s)", kind, obj.GetUID(), kind, r.UID)
	case gone(obj.GetDeletionTimestamp(), deletedBefore):
		return errors.New("service account token has been invalidated")
	}
	return nil
}

// gone: deleted (a deletionTimestamp) longer than the leeway ago.
func gone(deleted *metav1.Time, before time.Time) bool {
	return deleted != nil && deleted.Time.Before(before)
}
