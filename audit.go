package apiserver

// kube-apiserver's audit log: k8s.io/apiserver's audit filter, policy
// evaluator and log backend, configured as kube-apiserver's --audit-* flags
// configure them.

import (
	"errors"
	"fmt"
	"io"
	"os"

	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/apiserver/pkg/audit"
	"k8s.io/apiserver/pkg/audit/policy"
	pluginlog "k8s.io/apiserver/plugin/pkg/audit/log"
	"sigs.k8s.io/yaml"

	"github.com/kubeembed/apiserver/internal/controlplane"
)

// auditConfig is the audit policy and where events go; zero when the server
// does not audit.
type auditConfig struct {
	controlplane.Audit
	// file is the log file the server opened, closed by Close.
	file io.Closer
}

// auditOptions are the audit fields of Options.
type auditOptions struct {
	Policy     *auditv1.Policy
	PolicyFile string
	LogPath    string
	Events     func(*auditv1.Event)
}

// newAudit reads the policy of o and opens its destinations. As
// kube-apiserver, a server audits nothing without a policy.
func newAudit(o auditOptions) (auditConfig, error) {
	var p *auditinternal.Policy
	var err error
	switch {
	case o.Policy != nil && o.PolicyFile != "":
		return auditConfig{}, errors.New("options: AuditPolicy and AuditPolicyFile are exclusive")
	case o.Policy != nil:
		typed := o.Policy.DeepCopy()
		typed.APIVersion, typed.Kind = auditv1.SchemeGroupVersion.String(), "Policy"
		var data []byte
		if data, err = yaml.Marshal(typed); err == nil {
			p, err = policy.LoadPolicyFromBytes(data)
		}
	case o.PolicyFile != "":
		p, err = policy.LoadPolicyFromFile(o.PolicyFile)
	default:
		return auditConfig{}, nil
	}
	if err != nil {
		return auditConfig{}, fmt.Errorf("options: audit policy: %w", err)
	}
	c := auditConfig{Audit: controlplane.Audit{Evaluator: policy.NewPolicyRuleEvaluator(p)}}
	var backends []audit.Backend
	if o.LogPath != "" {
		var out io.Writer = os.Stdout
		if o.LogPath != "-" {
			f, err := os.OpenFile(o.LogPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
			if err != nil {
				return auditConfig{}, fmt.Errorf("options: AuditLogPath: %w", err)
			}
			out, c.file = f, f
		}
		backends = append(backends, pluginlog.NewBackend(out, pluginlog.FormatJson, auditv1.SchemeGroupVersion))
	}
	if o.Events != nil {
		backends = append(backends, callbackBackend(o.Events))
	}
	if len(backends) > 0 {
		c.Backend = audit.Union(backends...)
	}
	return c, nil
}

// callbackBackend hands each event, as audit.k8s.io/v1, to a function.
type callbackBackend func(*auditv1.Event)

func (f callbackBackend) ProcessEvents(events ...*auditinternal.Event) bool {
	for _, ev := range events {
		out := &auditv1.Event{}
		if err := auditv1.Convert_audit_Event_To_v1_Event(ev, out, nil); err == nil {
			f(out)
		}
	}
	return true
}

func (callbackBackend) Run(<-chan struct{}) error { return nil }
func (callbackBackend) Shutdown()                 {}
func (callbackBackend) String() string            { return "kubeembed-callback" }
