"""A configuration file as a source, taken only once it is complete and stable."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

from ddm_core.errors import ConfigError, SourceUnavailableError
from ddm_core.metadata.limits import MAX_DOCUMENT_BYTES
from ddm_core.metadata.sources import Fetched

__all__ = ["FileSource"]


class FileSource:
    """A configuration file, taken only once it is complete and stable.

    Publish a new version atomically: write the whole text to a temporary
    file in the same directory, then rename it over the configuration
    (``os.replace(tmp, path)`` in Python, ``mv`` in a shell). Readers then see
    the old file or the new one, never a mix. A file rewritten in place (an
    editor saving over it, ``cat > ddm.yaml``) can be read half-written, and a
    truncated YAML file often still parses — cut before ``slots:`` it even
    validates, with an even slot layout. So :meth:`fetch` reads the file
    twice, ``settle`` seconds apart, and takes it only when size, modification
    time, inode and content hash agree; while it keeps changing (up to
    ``max_wait`` seconds) the source counts as unavailable and the serving
    version stays. The debounce narrows the window but cannot close it for a
    writer that stalls mid-file longer than ``settle``: only the rename does.
    (Independently, :class:`~ddm_core.metadata.reload.ConfigHolder` refuses a version that moves data.)

    Args:
        path: The file.
        settle: Seconds between the two reads that must agree.
        max_wait: Seconds a fetch waits for a file that keeps changing.
    """

    def __init__(self, path: str | os.PathLike[str], *, settle: float = 0.05, max_wait: float = 5.0) -> None:
        if settle < 0 or max_wait < 0:
            raise ConfigError(f"FileSource settle and max_wait must be >= 0, not {settle} and {max_wait}")
        self.path = Path(path)
        self.settle = settle
        self.max_wait = max_wait

    def _read(self) -> tuple[str, bytes]:
        """One look at the file: (revision, content); the revision covers both."""
        st = self.path.stat()
        with self.path.open("rb") as f:
            data = f.read(MAX_DOCUMENT_BYTES + 1)  # never more than the loader would accept
        if len(data) > MAX_DOCUMENT_BYTES:
            raise SourceUnavailableError(
                f"configuration file {str(self.path)!r} is larger than {MAX_DOCUMENT_BYTES} bytes "
                "(docs/config-limits.md)",
                path=str(self.path),
            )
        # The hash catches a rewrite of the same size within the file system's mtime granularity.
        digest = hashlib.sha256(data).hexdigest()[:32]
        return f"{st.st_mtime_ns}:{st.st_size}:{st.st_ino}:{digest}", data

    def _pause(self) -> None:
        time.sleep(self.settle)

    def _stable_read(self) -> tuple[str, bytes]:
        deadline = time.monotonic() + self.max_wait
        seen = self._read()
        while True:
            self._pause()
            again = self._read()
            if again[0] == seen[0]:
                return again
            if time.monotonic() >= deadline:
                raise SourceUnavailableError(
                    f"configuration file {str(self.path)!r} is still being written: it changed between "
                    f"reads {self.settle} s apart for {self.max_wait} s; publish new versions by writing "
                    "a temporary file and renaming it over this one (os.replace)",
                    path=str(self.path),
                )
            seen = again

    def fetch(self) -> Fetched:
        try:
            revision, data = self._stable_read()
        except OSError as exc:
            raise SourceUnavailableError(
                f"configuration file {str(self.path)!r} cannot be read: {exc.strerror or exc}",
                path=str(self.path),
            ) from exc
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SourceUnavailableError(
                f"configuration file {str(self.path)!r} is not UTF-8 text (byte {exc.start})",
                path=str(self.path),
            ) from exc
        return Fetched(text, revision, str(self.path), self.path.resolve().parent)

    def changed(self, revision: str | None) -> bool:
        try:
            return revision is None or self._read()[0] != revision
        except OSError:
            return True  # let fetch() report it

    def __repr__(self) -> str:
        return f"FileSource({str(self.path)!r})"
