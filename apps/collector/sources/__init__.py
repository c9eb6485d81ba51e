"""Where cluster data comes from: one folder per source, each of the same shape —

- `client.py` talks to the outside (HTTP, the kubernetes client, files) and hands back what it was sent;
- `convert.py` turns those payloads into readings and inventory: pure functions, tested on captured payloads;
- `source.py` is the Source the collector calls (`base.Source`), built from the two.

`base.py` holds the interface, its values and its errors. Sources import it and never the registry, which maps a
cluster's source kind to one of them.
"""
