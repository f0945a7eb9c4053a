package core

// The options of pods/log, exec, attach and portforward, read from the
// query as kube-apiserver reads them: its parameter codec runs the
// url.Values conversions generated in k8s.io/kubernetes (not published),
// which these follow field by field with apimachinery's published
// converters (a bool is false only for "0" and "false"; a bad number is a
// 400 with strconv's error).

import (
	"net/url"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// queryReader converts query parameters into option fields, keeping the
// first error.
type queryReader struct {
	q   url.Values
	err error
}

func (r *queryReader) string(name string, into *string) {
	if v, ok := r.q[name]; ok && len(v) > 0 && r.err == nil {
		r.err = runtime.Convert_Slice_string_To_string(&v, into, nil)
	}
}

func (r *queryReader) bool(name string, into *bool) {
	if v, ok := r.q[name]; ok && len(v) > 0 && r.err == nil {
		r.err = runtime.Convert_Slice_string_To_bool(&v, into, nil)
	}
}

func (r *queryReader) int64(name string, into **int64) {
	if v, ok := r.q[name]; ok && len(v) > 0 && r.err == nil {
		r.err = runtime.Convert_Slice_string_To_Pointer_int64(&v, into, nil)
	}
}

// streams reads the streams an exec or attach asks for, and its container.
func (r *queryReader) streams(stdin, stdout, stderr, tty *bool, container *string) {
	r.bool("stdin", stdin)
	r.bool("stdout", stdout)
	r.bool("stderr", stderr)
	r.bool("tty", tty)
	r.string("container", container)
}

func decodeLogOptions(q url.Values) (*corev1.PodLogOptions, error) {
	o := &corev1.PodLogOptions{}
	r := &queryReader{q: q}
	r.string("container", &o.Container)
	r.bool("follow", &o.Follow)
	r.bool("previous", &o.Previous)
	r.int64("sinceSeconds", &o.SinceSeconds)
	if v, ok := q["sinceTime"]; ok && len(v) > 0 && r.err == nil {
		r.err = metav1.Convert_Slice_string_To_Pointer_v1_Time(&v, &o.SinceTime, nil)
	}
	r.bool("timestamps", &o.Timestamps)
	r.int64("tailLines", &o.TailLines)
	r.int64("limitBytes", &o.LimitBytes)
	r.bool("insecureSkipTLSVerifyBackend", &o.InsecureSkipTLSVerifyBackend)
	if v, ok := q["stream"]; ok && len(v) > 0 {
		stream := v[0]
		o.Stream = &stream
	}
	return o, r.err
}

func decodeExecOptions(q url.Values) (*corev1.PodExecOptions, error) {
	o := &corev1.PodExecOptions{}
	r := &queryReader{q: q}
	r.streams(&o.Stdin, &o.Stdout, &o.Stderr, &o.TTY, &o.Container)
	if v, ok := q["command"]; ok && len(v) > 0 {
		o.Command = v
	}
	return o, r.err
}

func decodeAttachOptions(q url.Values) (*corev1.PodAttachOptions, error) {
	o := &corev1.PodAttachOptions{}
	r := &queryReader{q: q}
	r.streams(&o.Stdin, &o.Stdout, &o.Stderr, &o.TTY, &o.Container)
	return o, r.err
}

func decodePortForwardOptions(q url.Values) (*corev1.PodPortForwardOptions, error) {
	o := &corev1.PodPortForwardOptions{}
	if v, ok := q["ports"]; ok && len(v) > 0 {
		if err := metav1.Convert_Slice_string_To_Slice_int32(&v, &o.Ports, nil); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// validateLogOptions is ValidatePodLogOptions with the
// PodLogsQuerySplitStreams gate off, as in v1.37.
func validateLogOptions(o *corev1.PodLogOptions) field.ErrorList {
	var errs field.ErrorList
	if o.TailLines != nil && *o.TailLines < 0 {
		errs = append(errs, field.Invalid(field.NewPath("tailLines"), *o.TailLines, "must be greater than or equal to 0"))
	}
	if o.LimitBytes != nil && *o.LimitBytes < 1 {
		errs = append(errs, field.Invalid(field.NewPath("limitBytes"), *o.LimitBytes, "must be greater than 0"))
	}
	switch {
	case o.SinceSeconds != nil && o.SinceTime != nil:
		errs = append(errs, field.Forbidden(field.NewPath(""), "at most one of `sinceTime` or `sinceSeconds` may be specified"))
	case o.SinceSeconds != nil && *o.SinceSeconds < 1:
		errs = append(errs, field.Invalid(field.NewPath("sinceSeconds"), *o.SinceSeconds, "must be greater than 0"))
	}
	if o.Stream != nil {
		errs = append(errs, field.Forbidden(field.NewPath("stream"), "may not be specified"))
	}
	return errs
}
