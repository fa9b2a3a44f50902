#!/usr/bin/env bash
# `tiedlm reproduce` on this workplace's lent GPU machine, after `tiedlm selfcheck --device cuda`, within a deadline.
#
#   bash tools/device_reproduce.sh SECONDS TABLE [RUN ...]
#
# Prepared as tools/device_selfcheck.sh says (.whl with the tomli-w wheel, .data with the corpus, both carried).
# Runs the selfcheck first (the brief: a lent GPU runs it before anything else), then the table's runs two at a
# time until SECONDS after this script started, when `timeout` sends SIGTERM (each run saves a checkpoint and
# stops). The device machine sends back at most 8 files of 16 MiB, so what returns in $OUT is the selfcheck's
# JSON and log, reproduce.log (opening with the selfcheck's device.txt: GPU, driver, commit; ending with the GPU's
# name) and runs.tar.gz: every run's config.toml, metrics.jsonl, summary.json and log
# (no checkpoints unless CHECKPOINTS=1; without them an unfinished run starts again next time). Two switches, as
# environment variables:
#   SELFCHECK=0    skip the selfcheck (a second call on the machine the first call's selfcheck already checked)
#   CHECKPOINTS=1  also pack each run's checkpoints and vocab.txt (a small model's best weights, for Figure 3's
#                  bands; a stopped run's last state, to resume it elsewhere); the archive is then cut into
#                  runs.tar.gz.NN pieces of 15 MiB (`cat runs.tar.gz.* | tar -xz` joins them)
#
# To resume a run stopped on an earlier lent machine, carry its folder (config.toml, vocab.txt, metrics.jsonl,
# checkpoints/) as runs/reproduce/TABLE/RUN: `reproduce` resumes it from its last checkpoint. The carry limit is
# 64 MiB in all; the corpora then travel smaller as .data.tar.xz (PTB and WikiText-2: 5 MB instead of 19), which
# this script unpacks into .data. `bash tools/device_carry.sh prepare TABLE RUN` readies all three.
set -uo pipefail
start=$SECONDS
deadline=${1:?seconds}; table=${2:?table}; shift 2
out=${OUT:-.}
. tools/device_env.sh  # the carried wheel and corpora (.data.tar.xz unpacked), PYTHONPATH=src, TIEDLM_DATA
[ "${SELFCHECK:-1}" = 0 ] || bash tools/device_selfcheck.sh
# the selfcheck's device.txt (GPU, driver, commit) opens reproduce.log instead: one file fewer of the 8 that come
# back, so that the selfcheck's files, the log and four 15 MiB pieces of a carried run's checkpoints all return
if [ -f "$out/device.txt" ]; then mv "$out/device.txt" "$out/reproduce.log"; else : >"$out/reproduce.log"; fi
left=$((deadline - (SECONDS - start)))
echo "selfcheck took $((SECONDS - start)) s; $left s left for $table $*" | tee -a "$out/reproduce.log"
only=(); [ $# -gt 0 ] && only=(--only "$@")
timeout -s TERM "$left" python3 -m tiedlm reproduce "$table" --runs runs/reproduce --jobs 2 --no-page "${only[@]}" \
  2>&1 | tee -a "$out/reproduce.log"
echo "reproduce exit ${PIPESTATUS[0]} after $((SECONDS - start)) s" | tee -a "$out/reproduce.log"
nvidia-smi --query-gpu=name --format=csv,noheader >> "$out/reproduce.log"
pack=(-name config.toml -o -name metrics.jsonl -o -name summary.json -o -name '*.log')
[ "${CHECKPOINTS:-0}" = 1 ] && pack+=(-o -name '*.safetensors' -o -name vocab.txt)
if [ ! -d runs/reproduce ]; then echo "no run folder to pack: runs/reproduce is missing" | tee -a "$out/reproduce.log"; exit 1; fi
(cd runs/reproduce && find . \( "${pack[@]}" \) -print0 | tar --null -czf "$out/runs.tar.gz" -T -)
if [ "$(stat -c %s "$out/runs.tar.gz")" -gt $((15 * 1024 * 1024)) ]; then
  split -b 15M -d "$out/runs.tar.gz" "$out/runs.tar.gz." && rm "$out/runs.tar.gz"
fi
ls -l "$out" | tee -a "$out/reproduce.log"
