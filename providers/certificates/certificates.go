// Package certificates serves certificates.k8s.io/v1 certificate signing
// requests, with /status and /approval. The requestor's identity is taken
// from the request; nothing signs: approval and the certificate are written
// by whoever plays the signer in a test.
package certificates

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	// kube-apiserver describes the table columns with the documentation of
	// its internal type, which matches v1beta1's.
	certificatesv1beta1 "k8s.io/api/certificates/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/kubeembed/apiserver/providers"
	"github.com/kubeembed/apiserver/providers/registry"
)

var gv = certificatesv1.SchemeGroupVersion

// Provider serves certificates.k8s.io.
func Provider() providers.Provider { return group }

var group = registry.Group{
	GroupVersion: gv, AddToScheme: certificatesv1.AddToScheme,
	Served: []registry.Served{csrs, trustBundles},
}

var usages = func() []string {
	var out []string
	for _, u := range []certificatesv1.KeyUsage{
		certificatesv1.UsageSigning, certificatesv1.UsageDigitalSignature, certificatesv1.UsageContentCommitment,
		certificatesv1.UsageKeyEncipherment, certificatesv1.UsageKeyAgreement, certificatesv1.UsageDataEncipherment,
		certificatesv1.UsageCertSign, certificatesv1.UsageCRLSign, certificatesv1.UsageEncipherOnly,
		certificatesv1.UsageDecipherOnly, certificatesv1.UsageAny, certificatesv1.UsageServerAuth,
		certificatesv1.UsageClientAuth, certificatesv1.UsageCodeSigning, certificatesv1.UsageEmailProtection,
		certificatesv1.UsageSMIME, certificatesv1.UsageIPsecEndSystem, certificatesv1.UsageIPsecTunnel,
		certificatesv1.UsageIPsecUser, certificatesv1.UsageTimestamping, certificatesv1.UsageOCSPSigning,
		certificatesv1.UsageMicrosoftSGC, certificatesv1.UsageNetscapeSGC,
	} {
		out = append(out, string(u))
	}
	return out
}()

func validateCSR(c *certificatesv1.CertificateSigningRequest) field.ErrorList {
	p := field.NewPath("spec")
	var errs field.ErrorList
	block, _ := pem.Decode(c.Spec.Request)
	switch {
	case block == nil:
		errs = append(errs, field.Invalid(p.Child("request"), c.Spec.Request, "PEM block type must be CERTIFICATE REQUEST"))
	case block.Type != "CERTIFICATE REQUEST":
		errs = append(errs, field.Invalid(p.Child("request"), c.Spec.Request, "PEM block type must be CERTIFICATE REQUEST"))
	default:
		if _, err := x509.ParseCertificateRequest(block.Bytes); err != nil {
			errs = append(errs, field.Invalid(p.Child("request"), c.Spec.Request, err.Error()))
		}
	}
	if c.Spec.SignerName == "" {
		errs = append(errs, field.Required(p.Child("signerName"), ""))
	} else {
		parts := strings.SplitN(c.Spec.SignerName, "/", 2)
		if len(parts) != 2 || parts[1] == "" {
			errs = append(errs, field.Invalid(p.Child("signerName"), c.Spec.SignerName, "must be a fully qualified domain and path of the form 'example.com/signer-name'"))
		} else {
			for _, msg := range validation.IsDNS1123Subdomain(parts[0]) {
				errs = append(errs, field.Invalid(p.Child("signerName"), c.Spec.SignerName, msg))
			}
		}
	}
	if len(c.Spec.Usages) == 0 {
		errs = append(errs, field.Required(p.Child("usages"), "usages must be provided"))
	}
	for i, u := range c.Spec.Usages {
		if !slices.Contains(usages, string(u)) {
			errs = append(errs, field.NotSupported(p.Child("usages").Index(i), u, usages))
		}
	}
	if e := c.Spec.ExpirationSeconds; e != nil && *e < 600 {
		errs = append(errs, field.Invalid(p.Child("expirationSeconds"), *e, "may not specify a duration less than 600 seconds (10 minutes)"))
	}
	return errs
}

// csrs is the CSR kind: its main resource ignores writes to spec and
// status, /status writes the status but not approval conditions, and
// /approval writes only the Approved and Denied conditions.
var csrs = registry.Kind[*certificatesv1.CertificateSigningRequest]{
	GroupVersion: gv, Resource: "certificatesigningrequests", Singular: "certificatesigningrequest",
	ShortNames: []string{"csr"}, Status: true, NameValidation: registry.PathSegmentName,
	// The spec is the requestor's and immutable: updates keep the old one.
	ResetPaths: []string{"spec"},
	NewObj:     func() runtime.Object { return &certificatesv1.CertificateSigningRequest{} },
	NewList:    func() runtime.Object { return &certificatesv1.CertificateSigningRequestList{} },
	PrepareCreate: func(ctx context.Context, c *certificatesv1.CertificateSigningRequest) {
		c.Spec.Username, c.Spec.UID, c.Spec.Groups, c.Spec.Extra = "", "", nil, nil
		if u, ok := genericapirequest.UserFrom(ctx); ok {
			c.Spec.Username, c.Spec.UID, c.Spec.Groups = u.GetName(), u.GetUID(), u.GetGroups()
			for k, v := range u.GetExtra() {
				if c.Spec.Extra == nil {
					c.Spec.Extra = map[string]certificatesv1.ExtraValue{}
				}
				c.Spec.Extra[k] = v
			}
		}
	},
	PrepareUpdate: func(c, old *certificatesv1.CertificateSigningRequest) { c.Spec = old.Spec },
	Validate:      validateCSR,
	PrepareStatusUpdate: func(c, old *certificatesv1.CertificateSigningRequest) {
		// Approval is /approval's; the status subresource keeps it.
		c.Status.Conditions = mergeConditions(c.Status.Conditions, old.Status.Conditions, false)
		populateConditionTimestamps(c, old, metav1.Now())
	},
	StatusLike: map[string]registry.StatusWrite[*certificatesv1.CertificateSigningRequest]{"approval": {
		Prepare: func(c, old *certificatesv1.CertificateSigningRequest) {
			c.Status = certificatesv1.CertificateSigningRequestStatus{
				Conditions:  mergeConditions(c.Status.Conditions, old.Status.Conditions, true),
				Certificate: old.Status.Certificate,
			}
			populateConditionTimestamps(c, old, metav1.Now())
		},
		Validate: func(c, _ *certificatesv1.CertificateSigningRequest) field.ErrorList {
			var approved, denied bool
			for _, cond := range c.Status.Conditions {
				approved = approved || (cond.Type == certificatesv1.CertificateApproved && cond.Status == corev1.ConditionTrue)
				denied = denied || (cond.Type == certificatesv1.CertificateDenied && cond.Status == corev1.ConditionTrue)
			}
			if approved && denied {
				return field.ErrorList{field.Invalid(field.NewPath("status", "conditions"), c.Status.Conditions, "Approved and Denied conditions are mutually exclusive")}
			}
			return nil
		},
	}},
	NoAge: true,
	Columns: []registry.Column{
		registry.AgeColumn(),
		registry.ColumnOf("SignerName", "string", certificatesv1beta1.CertificateSigningRequestSpec{}.SwaggerDoc()["signerName"], 0, func(c *certificatesv1.CertificateSigningRequest) any { return c.Spec.SignerName }),
		registry.ColumnOf("Requestor", "string", certificatesv1beta1.CertificateSigningRequestSpec{}.SwaggerDoc()["request"], 0, func(c *certificatesv1.CertificateSigningRequest) any { return c.Spec.Username }),
		registry.ColumnOf("RequestedDuration", "string", certificatesv1.CertificateSigningRequestSpec{}.SwaggerDoc()["expirationSeconds"], 0, func(c *certificatesv1.CertificateSigningRequest) any {
			if c.Spec.ExpirationSeconds == nil {
				return "<none>"
			}
			return duration.HumanDuration(time.Duration(*c.Spec.ExpirationSeconds) * time.Second)
		}),
		registry.ColumnOf("Condition", "string", certificatesv1beta1.CertificateSigningRequestStatus{}.SwaggerDoc()["conditions"], 0, conditionSummary),
	},
	Fields: func(c *certificatesv1.CertificateSigningRequest) fields.Set {
		return fields.Set{"spec.signerName": c.Spec.SignerName}
	},
	FieldNames: []string{"spec.signerName"},
	Customize:  refuseLegacySignerOnCreate,
}

// refuseLegacySignerOnCreate refuses new requests for
// kubernetes.io/legacy-unknown, as kube-apiserver refuses them through
// certificates.k8s.io/v1. Only new ones: an update keeps the spec, and
// kube-apiserver lets a request that already has the legacy signer be
// updated (allowLegacySignerName, "compatibility with existing data"),
// such as one stored by an older kubeembed, or its finalizers could never
// be removed.
func refuseLegacySignerOnCreate(_ providers.Config, store *registry.Store, _ map[string]rest.Storage) error {
	validate := store.Strategy.ValidateCreate
	store.Strategy.ValidateCreate = func(ctx context.Context, obj runtime.Object) field.ErrorList {
		errs := validate(ctx, obj)
		if c := obj.(*certificatesv1.CertificateSigningRequest); c.Spec.SignerName == certificatesv1beta1.LegacyUnknownSignerName {
			errs = append(errs, field.Invalid(field.NewPath("spec", "signerName"), c.Spec.SignerName,
				"the legacy signerName is not allowed via this API version"))
		}
		return errs
	}
	return nil
}

// populateConditionTimestamps fills in the times c's conditions lack, as
// kube-apiserver's /status and /approval strategies do: lastUpdateTime is
// now; lastTransitionTime is that of old's condition of the same type and
// status, if it has one, else now.
func populateConditionTimestamps(c, old *certificatesv1.CertificateSigningRequest, now metav1.Time) {
	for i := range c.Status.Conditions {
		cond := &c.Status.Conditions[i]
		if cond.LastUpdateTime.IsZero() {
			cond.LastUpdateTime = now
		}
		if !cond.LastTransitionTime.IsZero() {
			continue
		}
		cond.LastTransitionTime = now
		for _, o := range old.Status.Conditions {
			if o.Type == cond.Type && o.Status == cond.Status && !o.LastTransitionTime.IsZero() {
				cond.LastTransitionTime = o.LastTransitionTime
				break
			}
		}
	}
}

func isApproval(t certificatesv1.RequestConditionType) bool {
	return t == certificatesv1.CertificateApproved || t == certificatesv1.CertificateDenied
}

// mergeConditions keeps the new conditions of one family (approval or not)
// and the old ones of the other.
func mergeConditions(next, old []certificatesv1.CertificateSigningRequestCondition, approval bool) []certificatesv1.CertificateSigningRequestCondition {
	var out []certificatesv1.CertificateSigningRequestCondition
	for _, c := range old {
		if isApproval(c.Type) != approval {
			out = append(out, c)
		}
	}
	for _, c := range next {
		if isApproval(c.Type) == approval {
			out = append(out, c)
		}
	}
	return out
}

// conditionSummary is the CONDITION column as kube-apiserver prints it:
// Denied, Approved or Pending (by the presence of the condition, whatever
// its status), then ",Failed" and ",Issued".
func conditionSummary(c *certificatesv1.CertificateSigningRequest) any {
	var approved, denied, failed bool
	for _, cond := range c.Status.Conditions {
		switch cond.Type {
		case certificatesv1.CertificateApproved:
			approved = true
		case certificatesv1.CertificateDenied:
			denied = true
		case certificatesv1.CertificateFailed:
			failed = true
		}
	}
	status := "Pending"
	switch {
	case denied:
		status = "Denied"
	case approved:
		status = "Approved"
	}
	if failed {
		status += ",Failed"
	}
	if len(c.Status.Certificate) > 0 {
		status += ",Issued"
	}
	return status
}

// trustBundles are cluster trust bundles: PEM CA certificates published
// for workloads, optionally on behalf of a signer whose name prefixes the
// bundle's.
var trustBundles = registry.Kind[*certificatesv1.ClusterTrustBundle]{
	GroupVersion: gv, Resource: "clustertrustbundles", Singular: "clustertrustbundle",
	// A signer's bundles are named "<signer with : for />:<name>"; the
	// others are DNS subdomains.
	NameValidation: func(name string, prefix bool) []string {
		if strings.Contains(name, ":") {
			return nil
		}
		return apivalidation.NameIsDNSSubdomain(name, prefix)
	},
	NewObj:  func() runtime.Object { return &certificatesv1.ClusterTrustBundle{} },
	NewList: func() runtime.Object { return &certificatesv1.ClusterTrustBundleList{} },
	Validate: func(b *certificatesv1.ClusterTrustBundle) field.ErrorList {
		var errs field.ErrorList
		if b.Spec.SignerName != "" {
			prefix := strings.ReplaceAll(b.Spec.SignerName, "/", ":") + ":"
			if !strings.HasPrefix(b.Name, prefix) {
				errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), b.Name, "ClusterTrustBundle for signerName "+b.Spec.SignerName+" must be named with prefix "+prefix))
			}
		} else if strings.Contains(b.Name, ":") {
			errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), b.Name, "ClusterTrustBundle without signer name must not have \":\" in its name"))
		}
		p := field.NewPath("spec", "trustBundle")
		rest, n := []byte(b.Spec.TrustBundle), 0
		for {
			var block *pem.Block
			block, rest = pem.Decode(rest)
			if block == nil {
				break
			}
			n++
			if block.Type != "CERTIFICATE" {
				errs = append(errs, field.Invalid(p, "<value omitted>", fmt.Sprintf("entry %d has bad block type: %s", n-1, block.Type)))
			} else if _, err := x509.ParseCertificate(block.Bytes); err != nil {
				errs = append(errs, field.Invalid(p, "<value omitted>", fmt.Sprintf("entry %d does not parse as X.509", n-1)))
			}
		}
		if n == 0 {
			errs = append(errs, field.Invalid(p, "<value omitted>", "at least one trust anchor must be provided"))
		}
		return errs
	},
	ValidateUpdate: func(b, old *certificatesv1.ClusterTrustBundle) field.ErrorList {
		return apivalidation.ValidateImmutableField(b.Spec.SignerName, old.Spec.SignerName, field.NewPath("spec", "signerName"))
	},
	Columns: []registry.Column{
		registry.ColumnOf("SignerName", "string", certificatesv1.ClusterTrustBundleSpec{}.SwaggerDoc()["signerName"], 0, func(b *certificatesv1.ClusterTrustBundle) any {
			if b.Spec.SignerName == "" {
				return "<none>"
			}
			return b.Spec.SignerName
		}),
	},
	NoAge: true,
	Fields: func(b *certificatesv1.ClusterTrustBundle) fields.Set {
		return fields.Set{"spec.signerName": b.Spec.SignerName}
	},
	FieldNames: []string{"spec.signerName"},
}
