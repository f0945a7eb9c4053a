// Package apiserver runs a real Kubernetes API server inside the process, for
// testing controllers against true API semantics: validation, defaulting,
// admission, server-side apply, watch, CRDs with structural schemas and CEL.
//
// New assembles the three delegating tiers kube-apiserver's CreateServerChain
// builds (kube-aggregator, the built-in groups, apiextensions-apiserver) on a
// loopback TLS listener with in-memory storage; Start serves it and returns
// once /readyz is ok; Close stops it. Many servers can run in one process,
// each with its own storage, informers and port. ExampleNew is a complete
// program; in tests, use testing/apiservertest.Start, which also closes the
// server when the test ends.
//
// # What a server shares with the process
//
// The Kubernetes libraries keep some state per process, and every server of
// a process shares it (internal/globals lists it all):
//
//   - klog's global logger. The first New points it at a logger that prints
//     only errors to stderr, so that the libraries' info logs do not flood
//     test output; Options.KeepKlogLogger leaves it alone. A server's own
//     logs, and the libraries' that log through a context, go to
//     Options.Logger.
//   - Feature gates: kube-apiserver's defaults, read and never written.
//   - Caches of OpenAPI documents keyed by the API groups a server serves,
//     and the decoded RBAC bootstrap policy: written once, then only read.
//
// Nothing else is shared: each server has its own certificate authority
// (Server.CACert; a client certificate of one server is no credential for
// another), storage, informers, metrics (/metrics) and port, and two
// servers never see each other's objects.
package apiserver
