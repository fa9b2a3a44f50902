#!/usr/bin/env bash
# `tiedlm selfcheck --device cuda` on this workplace's lent GPU machine, run from the repository root there.
#
# That machine has PyTorch with CUDA and every tiedlm dependency but tomli-w, and reaches no package index.
# Before the device call, here (both folders listed in .git/info/exclude, both named in the call's `carry`):
#   python3 -m pip download --no-deps --only-binary=:all: -d .whl tomli-w      # a pure-Python wheel
#   mkdir -p .data && cp -r ../shared/data/ptb .data/                           # PTB (5 MB; else a generated text)
# then run `bash tools/device_selfcheck.sh` there. The report, the JSON and the log land in $OUT.
set -uo pipefail
out=${OUT:-.}
. tools/device_env.sh  # the carried wheel, PYTHONPATH=src, TIEDLM_DATA
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/device.txt"
git rev-parse --short HEAD 2>/dev/null | tee -a "$out/device.txt"
python3 -m tiedlm selfcheck --device cuda --json-file "$out/selfcheck.json" 2>&1 | tee "$out/selfcheck.log"
exit "${PIPESTATUS[0]}"
