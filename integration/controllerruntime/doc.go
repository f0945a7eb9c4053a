// Package controllerruntime tests kubeembed with controller-runtime: a
// manager, its cache and RESTMapper, and a reconciler, as operator authors
// use them. It is its own module so that controller-runtime never becomes a
// dependency of the library.
package controllerruntime
