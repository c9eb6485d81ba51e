"""The Prometheus source: `client` (its HTTP API), `convert` (the queries and their answers → values), `source`."""
