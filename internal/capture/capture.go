// Package capture notes what a handler answered: its status code and, if
// asked, its body, without hiding the optional interfaces (Flusher for
// watches, Hijacker, CloseNotifier) of the ResponseWriter it wraps.
package capture

import (
	"bytes"
	"net/http"

	"k8s.io/apiserver/pkg/endpoints/responsewriter"
)

// Writer wraps a ResponseWriter. Hand the handler Wrap(), not the Writer.
type Writer struct {
	http.ResponseWriter
	// Code is the status written; 0 until something is written.
	Code int
	// KeepBody keeps a copy of what is written in Body.
	KeepBody bool
	Body     bytes.Buffer
}

// WriteHeader implements http.ResponseWriter.
func (w *Writer) WriteHeader(code int) {
	if w.Code == 0 {
		w.Code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write implements http.ResponseWriter.
func (w *Writer) Write(p []byte) (int, error) {
	if w.Code == 0 {
		w.Code = http.StatusOK
	}
	if w.KeepBody {
		w.Body.Write(p)
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap implements responsewriter.UserProvidedDecorator.
func (w *Writer) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Wrap returns w with the optional interfaces of the writer it wraps.
func (w *Writer) Wrap() http.ResponseWriter { return responsewriter.WrapForHTTP1Or2(w) }
