"""The node agent, outside the Django apps: `cputune_agent.py` is one stdlib-only file that ships alone in its image.

This package marker only gives it an import name (`agent.cputune_agent`) for `manage.py agent`, the lab source, the
tests and the import contracts; the image copies the file without it.
"""
