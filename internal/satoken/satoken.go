// Package satoken issues and authenticates a server's service account tokens
// as kube-apiserver does: bound tokens (TokenRequest) are JWTs signed with the
// server's own key (ES256; a P-256 key costs microseconds to make, an RSA one
// ~100 ms per server), with kube-apiserver's claims, and are accepted only
// while the service account (and the pod, secret or node bound) still exists
// with the UID the token names. The issuer discovery documents
// (/.well-known/openid-configuration, /openid/v1/jwks) publish the key.
package satoken

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"

	"github.com/kubeembed/apiserver/providers"
)

// DefaultIssuer is the issuer (and API audience) of a server's tokens: the
// value kind and kubeadm clusters give kube-apiserver's
// --service-account-issuer.
const DefaultIssuer = "https://kubernetes.default.svc.cluster.local"

// Issuer signs a server's tokens and checks their signatures.
type Issuer struct {
	key    *ecdsa.PrivateKey
	keyID  string
	issuer string
}

// New makes an issuer with a fresh key.
func New(issuer string) (*Issuer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	return WithKey(issuer, key)
}

// WithKey makes an issuer signing with key (kube-apiserver's
// --service-account-signing-key-file).
func WithKey(issuer string, key *ecdsa.PrivateKey) (*Issuer, error) {
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, err
	}
	// kube-apiserver's key ID: the unpadded URL base64 of the SHA-256 of
	// the public key's DER.
	sum := sha256.Sum256(der)
	return &Issuer{key: key, keyID: base64.RawURLEncoding.EncodeToString(sum[:]), issuer: issuer}, nil
}

// Audiences are the API audiences: a token must name one to authenticate
// to the server.
func (i *Issuer) Audiences() []string { return []string{i.issuer} }

// claims are a bound token's, kube-apiserver's names.
type claims struct {
	Issuer     string     `json:"iss"`
	Subject    string     `json:"sub"`
	Audience   []string   `json:"aud"`
	Expiry     int64      `json:"exp"`
	NotBefore  int64      `json:"nbf"`
	IssuedAt   int64      `json:"iat"`
	ID         string     `json:"jti,omitempty"`
	Kubernetes kubeClaims `json:"kubernetes.io"`
}

type kubeClaims struct {
	Namespace      string `json:"namespace,omitempty"`
	ServiceAccount ref    `json:"serviceaccount"`
	Pod            *ref   `json:"pod,omitempty"`
	Secret         *ref   `json:"secret,omitempty"`
	Node           *ref   `json:"node,omitempty"`
}

type ref struct {
	Name string `json:"name,omitempty"`
	UID  string `json:"uid,omitempty"`
}

func refOf(name string, uid any) *ref { return &ref{Name: name, UID: fmt.Sprint(uid)} }

// IssueToken implements providers.TokenIssuer.
func (i *Issuer) IssueToken(_ context.Context, b providers.ServiceAccountToken) (string, error) {
	now := time.Now()
	sa := b.ServiceAccount
	c := claims{
		Issuer: i.issuer, Subject: serviceaccount.MakeUsername(sa.Namespace, sa.Name), Audience: b.Audiences,
		Expiry: now.Add(b.TTL).Unix(), NotBefore: now.Unix(), IssuedAt: now.Unix(), ID: uuid.NewString(),
		Kubernetes: kubeClaims{Namespace: sa.Namespace, ServiceAccount: *refOf(sa.Name, sa.UID)},
	}
	switch {
	case b.Pod != nil:
		c.Kubernetes.Pod = refOf(b.Pod.Name, b.Pod.UID)
		if b.Node != nil {
			c.Kubernetes.Node = refOf(b.Node.Name, b.Node.UID)
		}
	case b.Secret != nil:
		c.Kubernetes.Secret = refOf(b.Secret.Name, b.Secret.UID)
	case b.Node != nil:
		c.Kubernetes.Node = refOf(b.Node.Name, b.Node.UID)
	}
	return i.sign(c)
}

// sign encodes c as a JWS compact serialization signed with ES256.
func (i *Issuer) sign(c any) (string, error) {
	header, err := json.Marshal(map[string]string{"alg": "ES256", "kid": i.keyID})
	if err != nil {
		return "", err
	}
	payload, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	input := base64.RawURLEncoding.EncodeToString(header) + "." + base64.RawURLEncoding.EncodeToString(payload)
	digest := sha256.Sum256([]byte(input))
	r, s, err := ecdsa.Sign(rand.Reader, i.key, digest[:])
	if err != nil {
		return "", err
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return input + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}

// LegacyIssuer is the issuer of the token controller's secret-based tokens.
const LegacyIssuer = "kubernetes/serviceaccount"

// legacyClaims are a secret-based token's, kube-controller-manager's names.
type legacyClaims struct {
	Issuer             string `json:"iss"`
	Subject            string `json:"sub"`
	Namespace          string `json:"kubernetes.io/serviceaccount/namespace"`
	SecretName         string `json:"kubernetes.io/serviceaccount/secret.name"`
	ServiceAccountName string `json:"kubernetes.io/serviceaccount/service-account.name"`
	ServiceAccountUID  string `json:"kubernetes.io/serviceaccount/service-account.uid"`
}

// IssueLegacyToken signs the token of a kubernetes.io/service-account-token
// Secret: no expiry, no audience, valid while the secret holds it.
func (i *Issuer) IssueLegacyToken(sa *corev1.ServiceAccount, secretName string) (string, error) {
	return i.sign(legacyClaims{Issuer: LegacyIssuer, Subject: serviceaccount.MakeUsername(sa.Namespace, sa.Name),
		Namespace: sa.Namespace, SecretName: secretName, ServiceAccountName: sa.Name, ServiceAccountUID: string(sa.UID)})
}

// errNotOurs: the token is not a JWT this issuer signed.
var errNotOurs = errors.New("not a token of this issuer")

// verify checks token's signature and returns its issuer and payload.
func (i *Issuer) verify(token string) (issuer string, payload []byte, err error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return "", nil, errNotOurs
	}
	var header struct{ Alg, Kid string }
	raw, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil || json.Unmarshal(raw, &header) != nil || header.Alg != "ES256" {
		return "", nil, errNotOurs
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || len(sig) != 64 {
		return "", nil, errNotOurs
	}
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if !ecdsa.Verify(&i.key.PublicKey, digest[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
		return "", nil, errNotOurs
	}
	if payload, err = base64.RawURLEncoding.DecodeString(parts[1]); err != nil {
		return "", nil, errNotOurs
	}
	var iss struct {
		Issuer string `json:"iss"`
	}
	if err := json.Unmarshal(payload, &iss); err != nil || iss.Issuer != i.issuer && iss.Issuer != LegacyIssuer {
		return "", nil, errNotOurs
	}
	return iss.Issuer, payload, nil
}
