#!/usr/bin/env bash
# Resume (or start) the long reproduction runs in the background, each from a worktree pinned to the commit it
# started from, so that later changes to the code never alter a run halfway (the brief: one thread each, at most
# two at a time, run folders under ~/tiedlm-runs). Run it first thing in a session; it starts nothing that is
# already running, and recreates a missing worktree (and its venv) at its commit.
#
#   bash tools/background_queue.sh            # resume the queue below
#   bash tools/background_queue.sh --status   # what runs, each run's last epoch and what is left of it, and
#                                             # whether a run trained again repeats its snapshot (below) so far
#                                             # (or an attempt set aside as RUN/lost-N-epochs)
#   bash tools/background_queue.sh --snapshot # --status, and copies each started, unfinished run's config.toml,
#                                             # metrics.jsonl and queue log into experiments/results/in-progress
#                                             # (commit them at a session's end: a machine handed back bare keeps
#                                             # no run folder, and a run trained again is then compared with them;
#                                             # one that does not repeat them moves them to RUN/lost-N-epochs)
#
# The queue: COMMIT TABLE RUN, in order; the first two not finished run. Edit it as runs finish or start.
set -uo pipefail
QUEUE=(
  "4cc58af pappas2019-table4-awd drill-4-converged"
  "75eb24b pappas2019-table4-small dual-res-cpu-seed1112"
  "d7d4f74 inan2017-table2-small vd"
  "gpu inan2017-table2-small re-bias"
  "gpu inan2017-table2-small real"
)
# COMMIT `gpu`: a run that trains on lent GPU machines only (tools/device_carry.sh carries its folder there and
# back); listed for --status and --snapshot, never started here. WikiText-2's re-bias moved there on 2026-11-28,
# before this CPU had started it: 26.8 s an epoch on an H200 against ~95 min here, 16 epochs in its first call.
# REAL followed it there the same day, not yet started anywhere: ~49 s an epoch on an H100 (33 min for 40) against
# ~4 h here (140-180 h), so a handful of lent sessions against ~50 here. Should this CPU run out of queued runs
# before a GPU has started REAL, give it back its commit (d7d4f74) here.
# The converged rows started at f9f34ed and moved to 4cc58af (which adds train.optimizer.stop_on_stall, the stop
# their table now asks) before either had switched to averaging; no other training code differs between the two.
# dual-res-cpu (d8f4c8f) ran before the WikiText-2 rows (~30-160 h each) and was published on 2026-11-27: it parted
# the small page's best layer from its device (dual-res trained on a lent H100 at both seeds). Its second seed on
# this CPU (dual-res-cpu-seed1112, ~9 h here) goes before the WikiText-2 rows too: dual-res led DRILL-4 in all three
# comparisons run, and only this run gives the pair two seeds on one device; WikiText-2's rows wait ~9 h more of
# their ~60-160 h each. The WikiText-2 rows moved from 4cc58af to d7d4f74 before any had trained an epoch; its metrics
# lines name the host that trained each epoch and its numerics fingerprint (docs/cli.md, "Where a run trained").
repo=$(cd "$(dirname "$0")/.." && pwd)
runs=${TIEDLM_RUNS:-$HOME/tiedlm-runs}
data=${TIEDLM_DATA:-$(cd "$repo/../shared/data" 2>/dev/null && pwd)}
snapshots=${TIEDLM_SNAPSHOTS:-$repo/experiments/results/in-progress}
mkdir -p "$runs"

running() { pgrep -f -- "--resume $runs/$1/$2 " >/dev/null || pgrep -f -- "--out $runs/$1/$2 " >/dev/null; }
# the last epoch's record in words: its NT-ASGD stage where recorded (sgd / averaged / finetune) and valid ppl
last_epoch() {
  [ -s "$1/metrics.jsonl" ] || return 0
  tail -n 1 "$1/metrics.jsonl" | python3 -c 'import json, sys; m = json.load(sys.stdin); s = m.get("stage")
print("; epoch %d: %svalid %.2f" % (m["epoch"], s + ", " if s else "", m["valid_ppl"]))'
}

# how many epochs two metrics files (a snapshot $1, the run folder's $2) both have, where each of them repeats to the
# last digit of valid ppl; 0 where one differs
common() {
  python3 -c 'import json, sys
a, b = ([json.loads(line)["valid_ppl"] for line in open(path)] for path in sys.argv[1:])
n = min(len(a), len(b))
print(n if a[:n] == b[:n] else 0)' "$1" "$2"
}

# what is left of a started run at its own pace (`reproduce --dry-run`, which times nothing for a run with epochs
# recorded: the median wall time of its last epochs), from this checkout's tiedlm where it is set up
left() {
  [ "$3" -gt 0 ] && [ -x "$repo/.venv/bin/tiedlm" ] || return 0
  TIEDLM_DATA="$data" "$repo/.venv/bin/tiedlm" reproduce "$1" --dry-run --json --only "$2" --runs "$runs" 2>/dev/null |
    python3 -c 'import json, sys; r = json.load(sys.stdin)["runs"][0]; p = r["pace"]
if p: print("; ~%.1f h left%s at %.1f min an epoch" % (r["estimated_s"] / 3600, " at most" * r["at_most"], p["epoch_s"] / 60))' 2>/dev/null
}

# this host as the runs' records name it (CPU model, vector unit, numerics fingerprint at one thread, as the runs
# train: docs/cli.md, "Where a run trained"), so that a session's log says which host its epochs trained on, also
# for the runs pinned at commits from before those records
# (each run's queue log gets it too as the run resumes here)
host=""
if [ -x "$repo/.venv/bin/python" ]; then
  host=$("$repo/.venv/bin/python" -c 'import torch; torch.set_num_threads(1); from tiedlm.runtime import host_record as h
print("host: %(machine)s, numerics %(numerics)s" % h(torch.device("cpu")))' 2>/dev/null)
  [ -n "$host" ] && echo "$host"
fi

slots=2
for item in "${QUEUE[@]}"; do
  read -r commit table run <<<"$item"
  folder="$runs/$table/$run"
  epochs=$( [ -f "$folder/metrics.jsonl" ] && wc -l <"$folder/metrics.jsonl" || echo 0)
  if [ -f "$folder/summary.json" ]; then
    echo "$table/$run: finished ($epochs epochs)"; continue
  fi
  # published in this checkout: finished, whatever the run folder (a machine handed back bare loses ~/tiedlm-runs,
  # and a published row must not train again)
  if [ -f "$repo/experiments/results/reproduce/$table/$run/summary.json" ]; then
    echo "$table/$run: published"; continue
  fi
  keep="$snapshots/$table/$run"
  kept=$( [ -f "$keep/metrics.jsonl" ] && wc -l <"$keep/metrics.jsonl" || echo 0)
  # a run trained again after its folder was lost (same commit and seed) against its snapshot: whether its epochs
  # so far repeat the snapshot's first ones, as a host with the same numerics fingerprint does
  # (yes / no; empty where there is nothing to compare)
  same=""
  if [ "$epochs" -gt 0 ] && [ "$kept" -gt "$epochs" ]; then
    if [ "$(common "$keep/metrics.jsonl" "$folder/metrics.jsonl")" -eq "$epochs" ]; then same=yes; else same=no; fi
  fi
  if [ "${1:-}" = --snapshot ] && [ "$same" = no ]; then
    # the run trains again and does not repeat the snapshot's epochs (another host's numerics): the lost attempt
    # moves aside, kept for the record, and the run that trains now is snapshotted from here on
    lost="$keep/lost-$kept-epochs"
    mkdir -p "$lost" && mv "$keep/config.toml" "$keep/metrics.jsonl" "$lost/" &&
      { [ ! -f "$keep/queue.log" ] || mv "$keep/queue.log" "$lost/"; } &&
      echo "$table/$run: the run does not repeat the snapshot's first $epochs epochs: its $kept epochs moved to ${lost#"$repo"/}"
    kept=0 same=""
  fi
  case "$same" in
  yes) vs="; repeats the first $epochs of the snapshot's $kept epochs to the last digit" ;;
  no) vs="; does not repeat the snapshot's first $epochs epochs (another host's numerics?)" ;;
  *) vs="" ;;
  esac
  # and the attempts set aside before (RUN/lost-N-epochs, same commit and seed): the one that trained on a host
  # with this host's numerics should be repeated to the last digit as far as both go
  if [ "$epochs" -gt 0 ]; then
    for aside in "$keep"/lost-*-epochs; do
      [ -f "$aside/metrics.jsonl" ] || continue
      both=$(common "$aside/metrics.jsonl" "$folder/metrics.jsonl")
      [ "$both" -gt 0 ] && vs="$vs; repeats the first $both epochs of ${aside##*/} to the last digit"
    done
  fi
  if [ "${1:-}" = --snapshot ] && [ "$kept" -gt "$epochs" ]; then
    # the run folder has fewer epochs than the snapshot: it was lost and trains again; the snapshot stays for
    # the comparison (same commit and seed: do the epochs repeat?) until someone removes it by hand
    echo "$table/$run: snapshot kept (${keep#"$repo"/} has $kept epochs, the run $epochs$vs)"
  elif [ "${1:-}" = --snapshot ] && [ "$epochs" -gt 0 ]; then
    mkdir -p "$keep" && cp "$folder/config.toml" "$folder/metrics.jsonl" "$keep/" &&
      { [ ! -f "$runs/queue-$table-$run.log" ] || cp "$runs/queue-$table-$run.log" "$keep/queue.log"; } &&
      echo "$table/$run: snapshot of $epochs epochs in ${keep#"$repo"/}"
  fi
  if running "$table" "$run"; then
    echo "$table/$run: running ($epochs epochs done$(last_epoch "$folder")$vs$(left "$table" "$run" "$epochs"))"
    slots=$((slots - 1)); continue
  fi
  if [ "$commit" = gpu ]; then
    echo "$table/$run: on lent GPUs, never started here ($epochs epochs done$(last_epoch "$folder")$vs$(left "$table" "$run" "$epochs"); tools/device_carry.sh)"
    continue
  fi
  if [ "${1:-}" = --status ] || [ "${1:-}" = --snapshot ]; then
    echo "$table/$run: waiting ($epochs epochs done$(last_epoch "$folder")$vs$(left "$table" "$run" "$epochs"); pinned at $commit)"
    continue
  fi
  if [ "$slots" -le 0 ]; then echo "$table/$run: queued ($epochs epochs done)"; continue; fi
  # a worktree already at that commit with its venv (the ones started by hand: /work/runs-wt3, ...), else a new one;
  # never this checkout, whose code moves on with the work (a run started from it would change halfway)
  tree=$(git -C "$repo" worktree list --porcelain | awk -v c="$commit" '/^worktree /{w=$2} /^HEAD /{if (index($2, c) == 1) print w}' |
    while read -r w; do [ "$w" != "$repo" ] && [ -x "$w/.venv/bin/tiedlm" ] && echo "$w" && break; done)
  tree=${tree:-"$(dirname "$repo")/runs-$commit"}
  if [ ! -x "$tree/.venv/bin/tiedlm" ]; then
    git -C "$repo" worktree add -f "$tree" "$commit" >/dev/null 2>&1 || true
    (cd "$tree" && TIEDLM_NATIVE_DIR="$HOME/.cache/tiedlm-$commit-native" bash setup.sh >/dev/null) || {
      echo "$table/$run: could not set up $tree at $commit"; continue; }
  fi
  [ -n "$host" ] && echo "$(date -u +%FT%TZ) $host, resuming with $epochs epochs done" >>"$runs/queue-$table-$run.log"
  (cd "$tree" && nohup setsid env TIEDLM_DATA="$data" TIEDLM_NATIVE_DIR="$HOME/.cache/tiedlm-$commit-native" \
    .venv/bin/tiedlm reproduce "$table" --runs "$runs" --threads 1 --jobs 1 --only "$run" --no-page \
    >>"$runs/queue-$table-$run.log" 2>&1 &) </dev/null >/dev/null 2>&1  # detached: the caller's shell returns at once
  echo "$table/$run: resumed from $tree ($epochs epochs done)"
  slots=$((slots - 1))
done
