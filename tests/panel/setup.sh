#!/usr/bin/env bash
# What the panel's browser tests need, installed only when missing: Debian's chromium and its
# chromedriver, a CJK font (so screenshots show Chinese text), and Selenium from PyPI. A failed
# install is reported, not fatal: the tests then skip, saying what is missing.
set -uo pipefail

missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
{ [ -x /usr/bin/chromedriver ] || command -v chromedriver >/dev/null 2>&1; } || missing+=(chromium-driver)
if command -v fc-list >/dev/null 2>&1 && ! fc-list 2>/dev/null | grep -qi 'cjk'; then
    missing+=(fonts-noto-cjk)
elif ! command -v fc-list >/dev/null 2>&1; then
    missing+=(fonts-noto-cjk)
fi

if [ ${#missing[@]} -gt 0 ]; then
    if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"; } >/dev/null 2>&1; then
        echo "tests/panel/setup.sh: could not install ${missing[*]}: the panel tests will say why they skip" >&2
    fi
fi

if ! python3 -c 'import selenium' >/dev/null 2>&1; then
    python3 -m pip install -q --root-user-action=ignore selenium ||
        echo "tests/panel/setup.sh: could not install selenium: the panel tests will say why they skip" >&2
fi
exit 0
