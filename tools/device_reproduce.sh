#!/usr/bin/env bash
# `tiedlm reproduce` on this workplace's lent GPU machine, after `tiedlm selfcheck --device cuda`, within a deadline.
#
#   bash tools/device_reproduce.sh SECONDS TABLE [RUN ...]
#
# Prepared as tools/device_selfcheck.sh says (.whl with the tomli-w wheel, .data with the corpus, both carried).
# Runs the selfcheck first (the brief: a lent GPU runs it before anything else), then the table's runs two at a
# time until SECONDS after this script started, when `timeout` sends SIGTERM (each run saves a checkpoint and
# stops). The device machine sends back at most 8 files of 16 MiB, so what returns in $OUT is the selfcheck's
# three files, the queue's log and runs.tar.gz: every run's config.toml, metrics.jsonl, summary.json and log
# (no checkpoints: an unfinished run starts again next time).
set -uo pipefail
start=$SECONDS
deadline=${1:?seconds}; table=${2:?table}; shift 2
out=${OUT:-.}
bash tools/device_selfcheck.sh
if ls .whl/*.whl >/dev/null 2>&1; then export PYTHONPATH=/tmp/site; fi
export PYTHONPATH="src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
[ -d .data/ptb ] && export TIEDLM_DATA="$PWD/.data"
left=$((deadline - (SECONDS - start)))
echo "selfcheck took $((SECONDS - start)) s; $left s left for $table $*" | tee "$out/reproduce.log"
only=(); [ $# -gt 0 ] && only=(--only "$@")
timeout -s TERM "$left" python3 -m tiedlm reproduce "$table" --runs runs/reproduce --jobs 2 --no-page "${only[@]}" \
  2>&1 | tee -a "$out/reproduce.log"
echo "reproduce exit ${PIPESTATUS[0]} after $((SECONDS - start)) s" | tee -a "$out/reproduce.log"
nvidia-smi --query-gpu=name --format=csv,noheader >> "$out/reproduce.log"
(cd runs/reproduce && find . \( -name config.toml -o -name metrics.jsonl -o -name summary.json -o -name '*.log' \) \
  -print0 | tar --null -czf "$out/runs.tar.gz" -T -)
