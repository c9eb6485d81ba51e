"""The Kubernetes source: `client` (API server and kubelets), `convert` (their payloads → values), `source`."""
