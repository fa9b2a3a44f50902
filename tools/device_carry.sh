#!/usr/bin/env bash
# Carry one reproduction run from a lent GPU machine to the next, across sessions (this workplace's machines start
# bare; what comes back is at most 8 files of 16 MiB, what travels there at most 64 MiB in 8 paths).
#
#   bash tools/device_carry.sh prepare TABLE RUN    # here, before the device call; prints the call to make
#   bash tools/device_carry.sh unpack FILES_AT      # here, after it: the returned run replaces ~/tiedlm-runs/TABLE/RUN
#
# prepare: puts the tomli-w wheel in .whl, PTB and WikiText-2 as .data.tar.xz (~5 MB instead of ~19), and, where
# ~/tiedlm-runs/TABLE/RUN has started, its run folder (config.toml, vocab.txt, metrics.jsonl, checkpoints/) as
# runs/reproduce/TABLE/RUN; checks the three stay under the carry limit; prints the `run` call's carry and command
# (tools/device_reproduce.sh, which unpacks .data.tar.xz and resumes the carried run from its last checkpoint).
# unpack: joins runs.tar.gz.NN, and moves TABLE/RUN into ~/tiedlm-runs unless the folder there has more epochs;
# the device's log of the run is appended to ~/tiedlm-runs/queue-TABLE-RUN.log with the GPU's name and the date,
# so that the snapshot and the published run keep it (tools/background_queue.sh lists the run with commit `gpu`:
# never started on this CPU).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
runs=${TIEDLM_RUNS:-$HOME/tiedlm-runs}
data=${TIEDLM_DATA:-$repo/../shared/data}
epochs_of() { [ -f "$1/metrics.jsonl" ] && wc -l <"$1/metrics.jsonl" || echo 0; }

case "${1:-}" in
prepare)
  table=${2:?table}; run=${3:?run}; cd "$repo"
  mkdir -p .whl
  ls .whl/tomli_w-*.whl >/dev/null 2>&1 || python3 -m pip download -q --no-deps --only-binary=:all: -d .whl tomli-w
  [ -f .data.tar.xz ] || tar -cJf .data.tar.xz -C "$data" ptb wikitext-2
  carry=(.whl .data.tar.xz)
  if [ -d "$runs/$table/$run/checkpoints" ]; then
    rm -rf "runs/reproduce/$table/$run" && mkdir -p "runs/reproduce/$table/$run"
    cp -r "$runs/$table/$run/"{config.toml,vocab.txt,metrics.jsonl,checkpoints} "runs/reproduce/$table/$run/"
    rm -f "runs/reproduce/$table/$run/checkpoints/"*.tmp*
    carry+=("runs/reproduce/$table/$run")
  fi
  for p in "${carry[@]}"; do
    git check-ignore -q "$p" || { echo "device_carry: $p is not ignored by git; add it to .git/info/exclude" >&2; exit 2; }
  done
  bytes=$(du -cb "${carry[@]}" | tail -n 1 | cut -f 1)
  [ "$bytes" -le $((64 * 1024 * 1024)) ] ||
    { echo "device_carry: $((bytes / 1048576)) MiB to carry, over the 64 MiB limit" >&2; exit 2; }
  echo "carry ($((bytes / 1048576)) MiB): $(printf '"%s", ' "${carry[@]}" | sed 's/, $//')"
  echo "command: CHECKPOINTS=1 bash tools/device_reproduce.sh SECONDS $table $run"
  echo "(the selfcheck first, ~210 s; SELFCHECK=0 where this session's machine has passed it; $(epochs_of "$runs/$table/$run") epochs done)"
  ;;
unpack)
  at=${2:?files_at}; tmp=$(mktemp -d)
  if ls "$at"/runs.tar.gz.* >/dev/null 2>&1; then cat "$at"/runs.tar.gz.* | tar -xz -C "$tmp"
  else tar -xzf "$at/runs.tar.gz" -C "$tmp"; fi
  gpu=$(grep -v '^[-t]' "$at/reproduce.log" | grep -i 'nvidia\|gpu' | tail -n 1)  # the name the log ends with
  gpu=${gpu:-a lent GPU}
  for folder in "$tmp"/*/*/; do
    folder=${folder%/}; run=$(basename "$folder"); table=$(basename "$(dirname "$folder")")
    [ -f "$folder/config.toml" ] || continue
    here="$runs/$table/$run"
    if [ "$(epochs_of "$here")" -gt "$(epochs_of "$folder")" ]; then
      echo "$table/$run: kept ~/tiedlm-runs' folder ($(epochs_of "$here") epochs; the returned one has $(epochs_of "$folder"))"
      continue
    fi
    mkdir -p "$runs/$table" && rm -rf "$here.old" && { [ ! -d "$here" ] || mv "$here" "$here.old"; }
    mv "$folder" "$here" && rm -rf "$here.old"
    {
      echo "$(date -u +%FT%TZ) returned from $gpu (tools/device_reproduce.sh, unpacked here), now $(epochs_of "$here") epochs done:"
      cat "$(dirname "$folder")/$run.log" 2>/dev/null | grep -v '^\[\|^[a-z_]* = \|^$' || true
    } >>"$runs/queue-$table-$run.log"
    echo "$table/$run: $(epochs_of "$here") epochs in ${here}$([ -f "$here/summary.json" ] && echo ', finished')"
  done
  rm -rf "$tmp"
  ;;
*) echo "usage: bash tools/device_carry.sh prepare TABLE RUN | unpack FILES_AT" >&2; exit 2 ;;
esac
