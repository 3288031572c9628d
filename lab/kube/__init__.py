"""Embedded Kubernetes API server simulator (see shared/docs/apiserver-spec.md)."""
