package satoken

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
)

// The issuer discovery paths kube-apiserver serves.
const (
	OpenIDConfigurationPath = "/.well-known/openid-configuration"
	JWKSPath                = "/openid/v1/jwks"
)

// DiscoveryHandlers serve the OpenID provider configuration (its JWKS at
// externalURL) and the key set, as kube-apiserver does.
func (i *Issuer) DiscoveryHandlers(externalURL string) (config, jwks http.Handler) {
	configDoc, _ := json.Marshal(struct {
		Issuer        string   `json:"issuer"`
		JWKSURI       string   `json:"jwks_uri"`
		ResponseTypes []string `json:"response_types_supported"`
		SubjectTypes  []string `json:"subject_types_supported"`
		SigningAlgs   []string `json:"id_token_signing_alg_values_supported"`
	}{i.issuer, externalURL + JWKSPath, []string{"id_token"}, []string{"public"}, []string{"ES256"}})
	pub := i.key.PublicKey
	x, y := make([]byte, 32), make([]byte, 32)
	pub.X.FillBytes(x)
	pub.Y.FillBytes(y)
	jwksDoc, _ := json.Marshal(map[string]any{"keys": []map[string]string{{
		"use": "sig", "kty": "EC", "kid": i.keyID, "crv": "P-256", "alg": "ES256",
		"x": base64.RawURLEncoding.EncodeToString(x), "y": base64.RawURLEncoding.EncodeToString(y),
	}}})
	return serve(configDoc, "application/json"), serve(jwksDoc, "application/jwk-set+json")
}

func serve(doc []byte, contentType string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", contentType)
		w.Header().Set("Cache-Control", "public, max-age=3600")
		_, _ = w.Write(doc)
	})
}
