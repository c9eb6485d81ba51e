"""Static files for a production server, before and after `collectstatic`."""

from __future__ import annotations

from whitenoise.storage import CompressedManifestStaticFilesStorage


class StaticFiles(CompressedManifestStaticFilesStorage):
    """WhiteNoise's hashed, compressed files once `collectstatic` has written its manifest. Before that (a server
    started straight from a checkout) every page answered 500 "Missing staticfiles manifest entry": with no
    manifest at all, files keep their plain names, which WhiteNoise serves from the app folders (its finders)."""

    def stored_name(self, name: str) -> str:
        if not self.hashed_files:
            return name
        return super().stored_name(name)
