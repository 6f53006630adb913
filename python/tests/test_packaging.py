"""What the installed package carries: its metadata (version, Python bound,
license, extras), its wheel tag, the typing files, and the error of
``timebloom.scrapy`` without Scrapy. Read from the installed distribution,
against python/Cargo.toml and python/pyproject.toml of this checkout."""

import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import timebloom

PYTHON_DIR = Path(__file__).resolve().parents[1]


def toml_value(path: Path, table: str, key: str) -> str:
    """The string value of ``key`` in ``[table]`` of a TOML file (a plain
    ``key = "value"`` line; tomllib is 3.11+ only)."""
    current = None
    for line in path.read_text(encoding="utf-8").splitlines():
        header = re.fullmatch(r"\s*\[([^\]]+)\]\s*", line)
        if header:
            current = header.group(1).strip()
            continue
        m = re.fullmatch(rf'\s*{re.escape(key)}\s*=\s*"([^"]*)"\s*(#.*)?', line)
        if current == table and m:
            return m.group(1)
    raise AssertionError(f"no {key} in [{table}] of {path}")


def dist():
    """The installed distribution, checked to be the one imported."""
    d = metadata.distribution("timebloom")
    installed = Path(d.locate_file("timebloom/__init__.py")).resolve()
    assert installed == Path(timebloom.__file__).resolve(), (
        f"metadata of {installed}, but timebloom imported from {timebloom.__file__}"
    )
    return d


def test_version_is_the_crates():
    version = dist().version
    assert version == toml_value(PYTHON_DIR / "Cargo.toml", "package", "version")
    assert version == toml_value(PYTHON_DIR / "pyproject.toml", "project", "version")
    assert timebloom.__version__ == version


def test_requires_python_matches_abi3_py39():
    assert dist().metadata["Requires-Python"] == ">=3.9"


def test_license_and_summary_are_the_projects():
    meta = dist().metadata
    assert meta["License"] == toml_value(PYTHON_DIR / "Cargo.toml", "package", "license")
    assert meta["License"] == toml_value(PYTHON_DIR.parent / "Cargo.toml", "package", "license")
    assert meta["Summary"] == toml_value(PYTHON_DIR / "pyproject.toml", "project", "description")
    # No home page or project URL is declared, so none can point elsewhere.
    assert meta.get_all("Project-URL") is None
    assert meta.get_all("Home-page") is None


def test_scrapy_extra_requires_scrapy():
    meta = dist().metadata
    assert "scrapy" in meta.get_all("Provides-Extra")
    requires = [r.replace(" ", "").replace('"', "'") for r in meta.get_all("Requires-Dist")]
    assert "scrapy>=2.7;extra=='scrapy'" in requires
    # Nothing is required without an extra: the engine needs no Python package.
    assert all("extra==" in r for r in requires)


def test_wheel_is_abi3_for_cpython_39():
    wheel = dist().read_text("WHEEL")
    tags = [line.split(":", 1)[1].strip() for line in wheel.splitlines() if line.startswith("Tag:")]
    assert tags, wheel
    assert all(t.startswith("cp39-abi3-") for t in tags), tags
    extension = timebloom._timebloom.__file__
    assert Path(extension).name in ("_timebloom.abi3.so", "_timebloom.pyd"), extension


def test_typing_files_are_installed_beside_the_package():
    package = Path(timebloom.__file__).parent
    assert (package / "py.typed").is_file()
    assert (package / "__init__.pyi").is_file()
    recorded = {str(f).replace("\\", "/") for f in dist().files}
    assert {"timebloom/py.typed", "timebloom/__init__.pyi", "timebloom/scrapy.py"} <= recorded


def test_scrapy_module_without_scrapy_names_what_to_install():
    # A finder first in sys.meta_path makes `import scrapy` fail as when
    # Scrapy is not installed (ModuleNotFoundError, name "scrapy").
    code = (
        "import sys\n"
        "class NoScrapy:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'scrapy':\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, NoScrapy())\n"
        "try:\n"
        "    import timebloom.scrapy\n"
        "except ImportError as e:\n"
        "    print(type(e).__name__, e, sep=': ')\n"
        "else:\n"
        "    print('imported')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=Path(timebloom.__file__).parents[1]
    ).stdout.strip()
    assert out.startswith("ModuleNotFoundError: "), out
    assert "timebloom.scrapy needs Scrapy" in out, out
    assert "pip install scrapy" in out, out


def test_license_texts_are_installed():
    names = {Path(str(f)).name for f in dist().files if "licenses" in Path(str(f)).parts}
    assert {"LICENSE-MIT", "LICENSE-APACHE"} <= names, names
    for name in ("LICENSE-MIT", "LICENSE-APACHE"):
        installed = next(f for f in dist().files if Path(str(f)).name == name and "licenses" in Path(str(f)).parts)
        assert Path(installed.locate()).read_text(encoding="utf-8") == (PYTHON_DIR.parent / name).read_text(
            encoding="utf-8"
        )
