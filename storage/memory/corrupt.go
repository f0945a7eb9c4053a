package memory

import (
	"errors"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/features"
	"k8s.io/apiserver/pkg/storage"

	"github.com/kubeembed/apiserver/internal/globals"
)

// Objects that cannot be read back (the transformer or the decoder fails:
// a conversion webhook that refuses, say) are reported as kube-apiserver
// reports them while AllowUnsafeMalformedObjectDeletion is on (Beta, on by
// default in 1.37): a Get fails with a corrupt-object StorageError, a list
// reads on and fails with every corrupt key at once (StorageReadError), so
// that the registry's unsafe deletion can find them. The messages are
// etcd3's (k8s.io/apiserver/pkg/storage/etcd3/corrupt_obj_deleter.go).

// corruptObjectError says why an object is corrupt.
type corruptObjectError struct {
	err         error
	undecodable bool // else untransformable
	revision    int64
}

func (e *corruptObjectError) Unwrap() error { return e.err }
func (e *corruptObjectError) Error() string {
	what := "data from the storage is not transformable"
	if e.undecodable {
		what = "object not decodable"
	}
	return fmt.Sprintf("%s revision=%d: %v", what, e.revision, e.err)
}

func reportCorrupt() bool {
	return globals.Features().Enabled(features.AllowUnsafeMalformedObjectDeletion)
}

// maxCorruptInList caps the corrupt objects a list reports (etcd3's).
const maxCorruptInList = 100

// corruptList collects the corrupt objects of a list.
type corruptList struct{ errs []error }

// add records err if it is a corrupt object's; it returns the error that
// ends the list: err itself if it is not, the list's error once too many
// objects are corrupt, nil to read on.
func (c *corruptList) add(s *store, key string, err error) error {
	var corrupt *corruptObjectError
	if !errors.As(err, &corrupt) {
		return err
	}
	c.errs = append(c.errs, storage.NewCorruptObjError(key, corrupt))
	if len(c.errs) >= maxCorruptInList {
		return c.statusError(s, true)
	}
	return nil
}

// statusError is the list's error, nil when every object was read.
func (c *corruptList) statusError(s *store, truncated bool) error {
	if len(c.errs) == 0 {
		return nil
	}
	var causes []metav1.StatusCause
	for _, err := range c.errs {
		var se *storage.StorageError
		if errors.As(err, &se) {
			causes = append(causes, metav1.StatusCause{Type: metav1.CauseTypeUnexpectedServerResponse, Field: se.Key, Message: err.Error()})
		}
	}
	if truncated {
		causes = append(causes, metav1.StatusCause{Type: metav1.CauseTypeTooMany, Message: "too many errors, the list is truncated"})
	}
	message := fmt.Sprintf("failed to read one or more %s from the storage: %v", s.gr.String(), c.errs[0])
	if len(c.errs) > 1 {
		message = fmt.Sprintf("%s (and %d more)", message, len(c.errs)-1)
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Reason: metav1.StatusReasonStoreReadError,
		Details: &metav1.StatusDetails{Group: s.gr.Group, Kind: s.gr.Resource, Name: "list", Causes: causes},
		Message: message,
	}}
}
