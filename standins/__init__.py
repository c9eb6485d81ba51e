"""Stand-ins for what cannot run on a test machine: the Kubernetes API server with its kubelets, playing recorded
payloads (`apiserver`), and a simulated cluster at Kubernetes' limits (`simulator`), over plain HTTP (`http`).

Tests and benchmarks use them; the product never imports them (an import-linter contract in pyproject.toml) and the
image leaves them out (.dockerignore)."""
