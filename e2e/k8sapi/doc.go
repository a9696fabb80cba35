// Package k8sapi holds, in a module of its own, the test that decodes the
// Kubernetes manifests in deploy/kubernetes strictly against the official
// API types (k8s.io/api), offline, so that no other module of the
// repository requires Kubernetes' packages.
package k8sapi
