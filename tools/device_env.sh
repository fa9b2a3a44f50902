# Sourced by tools/device_selfcheck.sh and tools/device_reproduce.sh on the lent GPU machine (repository root):
# the environment both run tiedlm in there. That machine has PyTorch with CUDA and every tiedlm dependency but
# tomli-w, and reaches no package index, so the carried wheel (.whl) is installed once into /tmp/site (or
# $TIEDLM_DEVICE_SITE: tests/test_device_carry.py sources this script here); tiedlm runs
# from the checkout (PYTHONPATH=src) and reads the carried corpora (.data, unpacked from .data.tar.xz when only
# that came).
# Sourced once per call: device_reproduce.sh sources it, then runs device_selfcheck.sh, which inherits the exported
# TIEDLM_DEVICE_ENV and skips it (no second unpack, no "src:src" on PYTHONPATH).
[ -z "${TIEDLM_DEVICE_ENV:-}" ] || return 0
export TIEDLM_DEVICE_ENV=1
# (unpacked each time: a warm machine may keep an older .data, e.g. PTB alone from a selfcheck's call; 5 MB, ~1 s)
if [ -f .data.tar.xz ]; then mkdir -p .data && tar -xJf .data.tar.xz -C .data; fi
site=${TIEDLM_DEVICE_SITE:-/tmp/site}
if ls .whl/*.whl >/dev/null 2>&1; then
  [ -d "$site" ] ||
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" .whl/*.whl
  export PYTHONPATH="$site"
fi
export PYTHONPATH="src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
if [ -d .data ]; then export TIEDLM_DATA="$PWD/.data"; fi
