#!/usr/bin/env bash
# Train one model with the paper's hyperparameters (GloVe 50d offline) and run DkNN on it.
# Usage: [RUN=name] scripts/train_and_dknn.sh DATASET MODEL [extra train flags...]
# Writes results/${RUN:-DATASET_MODEL}; skips training when its train_result.json exists
# (and says so: other flags need another RUN name). An unfinished run continues from its
# last epoch (--resume) when it has a snapshot, so a long chain of runs survives being
# stopped; one without a snapshot starts over. The Chainer models get the GloVe vectors;
# a transformer (minilm, transformer) has its own word pieces.
# DkNN runs on the test and dev splits with exact faiss; DKNN_BACKEND=kdtree for the paper's
# (not for a run trained with --n-calib 0, which has no calibration split).
set -euo pipefail
if [ $# -lt 2 ] || [ "$1" = --help ] || [ "$1" = -h ]; then
  sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
  [ $# -ge 2 ] || [ "${1:-}" = --help ] || [ "${1:-}" = -h ]
  exit $?
fi
cd "$(dirname "$0")/.."
dataset=$1 model=$2; shift 2
out=results/${RUN:-${dataset}_${model}}
py=${PYTHON:-.venv/bin/python}
data=${DKNN_DATA_DIR:-../shared/data}
DKNN_FLAGS=(--backend "${DKNN_BACKEND:-faiss}")
vectors=(--word_vectors "$data/glove/glove.6B.50d.txt.gz")
case $model in minilm|transformer) vectors=() ;; esac
if [ -f "$out/train_result.json" ]; then
  echo "$out is trained already: training skipped${*:+ (flags $* not applied; pass RUN=another_name for a run with other flags)}" >&2
else
  replace=--force
  [ -f "$out/snapshot_latest.npz" ] && replace=--resume
  for flag in "$@"; do [ "$flag" = --resume ] && replace=; done
  mkdir -p "$(dirname "$out")"
  timing=$(mktemp)   # outside results/: a killed run leaves nothing there
  trap 'rm -f "$timing"' EXIT
  /usr/bin/time -f "peak_rss_kb %M wall_s %e" -o "$timing" \
    "$py" train_text_classifier.py --dataset "$dataset" --model "$model" --data-dir "$data" \
      ${vectors[@]+"${vectors[@]}"} --out "$out" $replace "$@"
  mv "$timing" "$out/time.txt"
  # recorded in the run's manifest: --force may replace the run with it (docs/your-files.md)
  "$py" -c 'import sys; from deepknn.storage import manifest; manifest.record(sys.argv[1], ["time.txt"])' "$out"
fi
if grep -q '"n_calib": 0,' "$out/args.json"; then
  echo "$out has no calibration split (--n-calib 0): DkNN skipped" >&2
  exit 0
fi
for split in test dev; do   # dev too: Table 1 shows both, so a gap is not one test set's noise
  [ -f "$out/dknn_${split}_${DKNN_BACKEND:-faiss}.json" ] ||
    "$py" run_dknn.py --model-setup "$out/args.json" --data-dir "$data" --split $split "${DKNN_FLAGS[@]}"
done
