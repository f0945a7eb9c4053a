package admissionregistration

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/kubeembed/apiserver/providers/internal/validation"
)

// A ValidatingAdmissionPolicy's expressions are compiled when it is
// written, as kube-apiserver's validation compiles them: a CEL error is a
// 422 naming the expression's field, with the compiler's message. Every
// expression is compiled as new (kube-apiserver compiles those an update
// keeps as stored ones, which only differs for a library newer than the
// server's compatibility version).

const (
	maxAuditAnnotations        = 20
	maxAuditValueExpressionLen = 5 * 1024
	maxMatchConditions         = 64
)

var policyReasons = []string{string(metav1.StatusReasonForbidden), string(metav1.StatusReasonInvalid), string(metav1.StatusReasonRequestEntityTooLarge)}

// statelessCompiler compiles expressions that name no variables; it is
// shared, as kube-apiserver's.
var statelessCompiler = sync.OnceValue(func() plugincel.Compiler {
	return plugincel.NewCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
})

// policyCompiler is the compiler of one policy: with variables, one that
// composes them (stateful: one per policy).
func policyCompiler(variables bool) plugincel.Compiler {
	if !variables {
		return statelessCompiler()
	}
	c, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		return statelessCompiler()
	}
	return c
}

// validatePolicyCEL checks a validating policy's match conditions,
// variables, validations and audit annotations, in kube-apiserver's order.
func validatePolicyCEL(p *admissionv1.ValidatingAdmissionPolicy) field.ErrorList {
	spec, path := &p.Spec, field.NewPath("spec")
	params := spec.ParamKind != nil
	compiler := policyCompiler(len(spec.Variables) > 0)
	errs := validateMatchConditions(spec.MatchConditions, params, path.Child("matchConditions"))
	for i, v := range spec.Variables {
		errs = append(errs, validateVariable(compiler, v, params, path.Child("variables").Index(i))...)
	}
	if len(spec.Validations) == 0 && len(spec.AuditAnnotations) == 0 {
		const msg = "validations or auditAnnotations must contain at least one item"
		return append(errs, field.Required(path.Child("validations"), msg), field.Required(path.Child("auditAnnotations"), msg))
	}
	for i, v := range spec.Validations {
		errs = append(errs, validateValidation(compiler, v, params, path.Child("validations").Index(i))...)
	}
	if len(spec.AuditAnnotations) > maxAuditAnnotations {
		errs = append(errs, field.Invalid(path.Child("auditAnnotations"), spec.AuditAnnotations, fmt.Sprintf("must not have more than %d auditAnnotations", maxAuditAnnotations)))
	}
	keys := sets.New[string]()
	for i, a := range spec.AuditAnnotations {
		errs = append(errs, validateAuditAnnotation(compiler, p.Name, a, params, path.Child("auditAnnotations").Index(i))...)
		if keys.Has(a.Key) {
			errs = append(errs, field.Duplicate(path.Child("auditAnnotations").Index(i).Child("key"), a.Key))
		}
		keys.Insert(a.Key)
	}
	return errs
}

// validateMatchConditions checks match conditions (a policy's, or a
// webhook's when params is false).
func validateMatchConditions(conditions []admissionv1.MatchCondition, params bool, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(conditions) > maxMatchConditions {
		errs = append(errs, field.TooMany(path, len(conditions), maxMatchConditions))
	}
	names := sets.New[string]()
	for i, c := range conditions {
		p := path.Index(i)
		if expr := strings.TrimSpace(c.Expression); expr == "" {
			errs = append(errs, field.Required(p.Child("expression"), ""))
		} else {
			errs = append(errs, compile(statelessCompiler(), &matchconditions.MatchCondition{Expression: expr},
				plugincel.OptionalVariableDeclarations{HasParams: params, HasAuthorizer: true}, p.Child("expression"))...)
		}
		if c.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), ""))
		} else {
			errs = append(errs, validation.QualifiedName(c.Name, p.Child("name"))...)
		}
		if c.Name != "" && names.Has(c.Name) {
			errs = append(errs, field.Duplicate(p.Child("name"), c.Name))
		}
		names.Insert(c.Name)
	}
	return errs
}

func validateVariable(compiler plugincel.Compiler, v admissionv1.Variable, params bool, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if strings.TrimSpace(v.Name) == "" {
		errs = append(errs, field.Required(path.Child("name"), "name is not specified"))
	} else if !celIdentifier(v.Name) {
		errs = append(errs, field.Invalid(path.Child("name"), v.Name, "must be a valid CEL identifier"))
	}
	if strings.TrimSpace(v.Expression) == "" {
		return append(errs, field.Required(path.Child("expression"), "expression is not specified"))
	}
	composited, ok := compiler.(*plugincel.CompositedCompiler)
	if !ok {
		return append(errs, field.InternalError(path, fmt.Errorf("variable composition is not allowed")))
	}
	variable := &validating.Variable{Name: v.Name, Expression: v.Expression}
	result := composited.CompileAndStoreVariable(variable, plugincel.OptionalVariableDeclarations{HasParams: params, HasAuthorizer: true}, environment.NewExpressions)
	if result.Error != nil {
		errs = append(errs, celError(path.Child("expression"), variable, result.Error))
	}
	return errs
}

func validateValidation(compiler plugincel.Compiler, v admissionv1.Validation, params bool, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if strings.TrimSpace(v.Expression) == "" {
		errs = append(errs, field.Required(path.Child("expression"), "expression is not specified"))
	} else {
		errs = append(errs, compile(compiler, &validating.ValidationCondition{Expression: v.Expression},
			plugincel.OptionalVariableDeclarations{HasParams: params, HasAuthorizer: true}, path.Child("expression"))...)
	}
	switch {
	case v.MessageExpression != "" && strings.TrimSpace(v.MessageExpression) == "":
		errs = append(errs, field.Invalid(path.Child("messageExpression"), v.MessageExpression, "must be non-empty if specified"))
	case v.MessageExpression != "":
		// Untrimmed, so that the compiler's columns are right.
		errs = append(errs, compile(compiler, &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression},
			plugincel.OptionalVariableDeclarations{HasParams: params}, path.Child("messageExpression"))...)
	}
	msg := strings.TrimSpace(v.Message)
	switch {
	case v.Message != "" && msg == "":
		errs = append(errs, field.Invalid(path.Child("message"), v.Message, "must be non-empty if specified"))
	case strings.ContainsAny(msg, "\n\r"):
		errs = append(errs, field.Invalid(path.Child("message"), v.Message, "must not contain line breaks"))
	}
	if v.Reason != nil && !slices.Contains(policyReasons, string(*v.Reason)) {
		errs = append(errs, field.NotSupported(path.Child("reason"), *v.Reason, policyReasons))
	}
	return errs
}

func validateAuditAnnotation(compiler plugincel.Compiler, policy string, a admissionv1.AuditAnnotation, params bool, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if policy != "" {
		errs = append(errs, validation.QualifiedName(policy+"/"+a.Key, path.Child("key"))...)
	} else {
		errs = append(errs, field.Invalid(path.Child("key"), a.Key, "requires metadata.name be non-empty"))
	}
	expr := strings.TrimSpace(a.ValueExpression)
	switch {
	case expr == "":
		return append(errs, field.Required(path.Child("valueExpression"), "valueExpression is not specified"))
	case len(expr) > maxAuditValueExpressionLen:
		return append(errs, field.Required(path.Child("valueExpression"), fmt.Sprintf("must not exceed %d bytes in length", maxAuditValueExpressionLen)))
	}
	result := compiler.CompileCELExpression(&validating.AuditAnnotationCondition{ValueExpression: expr},
		plugincel.OptionalVariableDeclarations{HasParams: params, HasAuthorizer: true}, environment.NewExpressions)
	if result.Error != nil {
		// The value shown is the expression as written, untrimmed.
		errs = append(errs, celError(path.Child("valueExpression"), &validating.AuditAnnotationCondition{ValueExpression: a.ValueExpression}, result.Error))
	}
	return errs
}

func compile(compiler plugincel.Compiler, expr plugincel.ExpressionAccessor, decls plugincel.OptionalVariableDeclarations, path *field.Path) field.ErrorList {
	if result := compiler.CompileCELExpression(expr, decls, environment.NewExpressions); result.Error != nil {
		return field.ErrorList{celError(path, expr, result.Error)}
	}
	return nil
}

// celError words a compile error as kube-apiserver's validation does.
func celError(path *field.Path, expr plugincel.ExpressionAccessor, err *apiservercel.Error) *field.Error {
	switch err.Type {
	case apiservercel.ErrorTypeRequired:
		return field.Required(path, err.Detail)
	case apiservercel.ErrorTypeInvalid:
		return field.Invalid(path, expr.GetExpression(), err.Detail)
	}
	return field.InternalError(path, err)
}

var celIdent = regexp.MustCompile("^[_a-zA-Z][_a-zA-Z0-9]*$")

var celReserved = sets.New("true", "false", "null", "in", "as", "break", "const", "continue", "else",
	"for", "function", "if", "import", "let", "loop", "package", "namespace", "return", "var", "void", "while")

// celIdentifier: a CEL IDENT, not a reserved word.
func celIdentifier(name string) bool { return celIdent.MatchString(name) && !celReserved.Has(name) }
