package runner

import (
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/kubeembed/apiserver/internal/certs"
)

// Fixtures is a webhook server both servers call, for scenarios about
// what goes wrong between an API server and its webhooks: on 127.0.0.1
// (both reach it by URL), with a certificate of a CA of its own.
// Scenarios name it with placeholders:
//
//   - {fixture-url}: https://127.0.0.1:PORT
//   - {fixture-ca}: the base64 caBundle that trusts it
//   - {other-ca}: the base64 caBundle of another CA (a TLS failure)
//
// Paths: /validate/ok allows, /validate/deny denies (403, "no thanks"),
// /validate/slow answers after 5 s (a webhook timeout), /convert/fail
// fails every conversion ("cannot convert").
type Fixtures struct {
	server *httptest.Server
	Vars   map[string]string
}

// StartFixtures starts the webhook server.
func StartFixtures() (*Fixtures, error) {
	ca, err := certs.NewCA("parity-fixtures-ca")
	if err != nil {
		return nil, err
	}
	other, err := certs.NewCA("parity-other-ca")
	if err != nil {
		return nil, err
	}
	leaf, err := ca.Serving("127.0.0.1", "localhost")
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
	if err != nil {
		return nil, err
	}
	s := httptest.NewUnstartedServer(fixtureHandler())
	s.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	s.StartTLS()
	return &Fixtures{server: s, Vars: map[string]string{
		"{fixture-url}": s.URL,
		"{fixture-ca}":  base64.StdEncoding.EncodeToString(ca.CertPEM),
		"{other-ca}":    base64.StdEncoding.EncodeToString(other.CertPEM),
	}}, nil
}

// Close stops the server.
func (f *Fixtures) Close() { f.server.Close() }

func fixtureHandler() http.Handler {
	mux := http.NewServeMux()
	review := func(w http.ResponseWriter, r *http.Request, response map[string]any) {
		var in struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Request    struct {
				UID string `json:"uid"`
			} `json:"request"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		response["uid"] = in.Request.UID
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"apiVersion": in.APIVersion, "kind": in.Kind, "response": response})
	}
	mux.HandleFunc("/validate/ok", func(w http.ResponseWriter, r *http.Request) {
		review(w, r, map[string]any{"allowed": true})
	})
	mux.HandleFunc("/validate/deny", func(w http.ResponseWriter, r *http.Request) {
		review(w, r, map[string]any{"allowed": false, "status": map[string]any{"code": 403, "message": "no thanks"}})
	})
	mux.HandleFunc("/validate/slow", func(w http.ResponseWriter, r *http.Request) {
		select { // longer than the webhook's timeout: the caller gives up first
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
		review(w, r, map[string]any{"allowed": true})
	})
	mux.HandleFunc("/convert/fail", func(w http.ResponseWriter, r *http.Request) {
		review(w, r, map[string]any{"result": map[string]any{"status": "Failure", "message": "cannot convert"}})
	})
	return mux
}
