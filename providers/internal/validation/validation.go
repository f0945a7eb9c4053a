// Package validation holds field checks several providers share that
// apimachinery's validation has no form for.
package validation

import (
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
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
