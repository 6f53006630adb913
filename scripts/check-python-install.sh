#!/usr/bin/env bash
# Checks the documented install, `pip install ./python[scrapy]`: a fresh
# virtual environment, the package built by pip from this checkout (pip
# fetches maturin; cargo must be on the PATH), imported from outside the
# source tree, and python/tests/test_packaging.py run against it (metadata,
# wheel tag, typing files). A release build: several minutes, so not part of
# CI, which builds its wheel with `maturin build`. PYTHON picks the
# interpreter (default python3).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"${PYTHON:-python3}" -m venv "$work/venv"
py=$work/venv/bin/python
"$py" -m pip install --quiet pytest

echo "== pip install ./python[scrapy]"
"$py" -m pip install --quiet "$root/python[scrapy]"

echo "== import from outside the checkout, and the packaging tests"
cd "$work"
"$py" -c 'import timebloom, timebloom.scrapy; print("installed", timebloom.__file__)'
"$py" -m pytest -q -p no:cacheprovider "$root/python/tests/test_packaging.py"
