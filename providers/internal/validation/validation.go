// Package validation holds field checks several providers share that
// apimachinery's validation has no form for.
package validation

import (
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// NonNegative checks that each named field under p is not negative, in the
// order given.
func NonNegative(p *field.Path, counts ...Count) field.ErrorList {
	var errs field.ErrorList
	for _, c := range counts {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(c.Value), p.Child(c.Name))...)
	}
	return errs
}

// Count is a named count for NonNegative, checked in the order given (the
// order of kube-apiserver's messages).
type Count struct {
	Name  string
	Value int32
}

// N names a count.
func N(name string, value int32) Count { return Count{Name: name, Value: value} }

// QualifiedName is kube-apiserver's ValidateQualifiedName: one error per
// way value is not a qualified name (prefix/name).
func QualifiedName(value string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range utilvalidation.IsQualifiedName(value) {
		errs = append(errs, field.Invalid(p, value, msg))
	}
	return errs
}
