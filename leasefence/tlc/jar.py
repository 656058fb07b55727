"""Find TLC: java and the pinned tla2tools.jar (given, cached, or downloaded and checked).

Which jar: ``$TLA2TOOLS_JAR``, else the user's cache (``$XDG_CACHE_HOME/leasefence/`` or
``~/.cache/leasefence/``), else the official v1.7.4 release jar downloaded into that cache and
checked against its published SHA-256. A jar whose checksum differs from the pin (a local build)
is used, and every report says it is unverified. No jar or no java: :class:`TlcUnavailable`, which
the command turns into exit status 3 and the tests into a skip with the same reason.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from leasefence.paths import cache_dir as cache_dir

#: The pinned TLC release: the last immutable one (TLC2 Version 2.19 of 08 August 2024).
TLC_VERSION = "1.7.4"
TLA2TOOLS_SHA256 = "936a262061c914694dfd669a543be24573c45d5aa0ff20a8b96b23d01e050e88"
TLA2TOOLS_URL = f"https://github.com/tlaplus/tlaplus/releases/download/v{TLC_VERSION}/tla2tools.jar"
#: Seconds allowed for the download to start answering: fail fast where there is no network.
DOWNLOAD_TIMEOUT = 5.0


class TlcUnavailable(Exception):
    """No TLC can be had here: no jar (none given, none cached, no download) or no java."""


@dataclass(frozen=True)
class Jar:
    """A tla2tools.jar, where it came from, and whether its checksum matches the pin."""

    path: Path
    sha256: str
    source: str  # "TLA2TOOLS_JAR", "cache" or "download"

    @property
    def verified(self) -> bool:
        return self.sha256 == TLA2TOOLS_SHA256

    def describe(self) -> str:
        """One line for reports: path, source and whether it is the pinned release."""
        if self.verified:
            return f"{self.path} ({self.source}; official v{TLC_VERSION}, SHA-256 verified)"
        return (
            f"{self.path} ({self.source}; UNVERIFIED: SHA-256 {self.sha256[:16]}... is not the "
            f"pinned v{TLC_VERSION} release's {TLA2TOOLS_SHA256[:16]}..., e.g. a local build)"
        )


def sha256_of(path: Path) -> str:
    """The SHA-256 of a file, in hex."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def download_jar(dest: Path, url: str = TLA2TOOLS_URL, timeout: float = DOWNLOAD_TIMEOUT) -> Jar:
    """Download the pinned jar to ``dest``, checking its SHA-256 before it is kept."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_suffix(".part")
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp, part.open("wb") as out:
            shutil.copyfileobj(resp, out)
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        part.unlink(missing_ok=True)
        raise TlcUnavailable(f"could not download {url}: {exc}") from None
    digest = sha256_of(part)
    if digest != TLA2TOOLS_SHA256:
        part.unlink(missing_ok=True)
        raise TlcUnavailable(
            f"downloaded {url} but its SHA-256 is {digest}, not the pinned {TLA2TOOLS_SHA256}; "
            "discarded"
        )
    part.replace(dest)
    return Jar(dest, digest, "download")


def find_jar(env: Mapping[str, str] | None = None, download: bool | None = None) -> Jar:
    """The tla2tools.jar to use: ``$TLA2TOOLS_JAR``, the cache, or a verified download.

    ``download=None`` downloads unless ``LEASEFENCE_NO_DOWNLOAD`` is set.
    """
    env = os.environ if env is None else env
    given = env.get("TLA2TOOLS_JAR")
    if given:
        path = Path(given).expanduser()
        if not path.is_file():
            raise TlcUnavailable(f"TLA2TOOLS_JAR={given} is not a file")
        return Jar(path, sha256_of(path), "TLA2TOOLS_JAR")
    cached = cache_dir(env) / "tla2tools.jar"
    if cached.is_file():
        return Jar(cached, sha256_of(cached), "cache")
    if download is None:
        download = not env.get("LEASEFENCE_NO_DOWNLOAD")
    if not download:
        raise TlcUnavailable(
            f"no tla2tools.jar: TLA2TOOLS_JAR is unset, {cached} does not exist, and downloading "
            "is disabled (LEASEFENCE_NO_DOWNLOAD)"
        )
    try:
        return download_jar(cached)
    except TlcUnavailable as exc:
        raise TlcUnavailable(
            f"no tla2tools.jar: TLA2TOOLS_JAR is unset, {cached} does not exist, and {exc}"
        ) from None


def find_java(env: Mapping[str, str] | None = None) -> str:
    """The java executable: ``$JAVA_HOME/bin/java``, else ``java`` on PATH."""
    env = os.environ if env is None else env
    home = env.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java", path=env.get("PATH"))
    if not found:
        raise TlcUnavailable("no java: JAVA_HOME is unset or has no bin/java, and none on PATH")
    return found


@dataclass(frozen=True)
class Tools:
    """Everything needed to run TLC."""

    java: str
    jar: Jar


def find_tools(env: Mapping[str, str] | None = None, download: bool | None = None) -> Tools:
    """Java and the jar, or :class:`TlcUnavailable` saying what is missing."""
    java = find_java(env)
    return Tools(java, find_jar(env, download))


def tools_or_reason() -> Tools | str:
    """The TLC tools, or the reason none can be had."""
    try:
        return find_tools()
    except TlcUnavailable as exc:
        return str(exc)
