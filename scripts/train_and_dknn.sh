#!/usr/bin/env bash
# Train one model with the paper's hyperparameters (GloVe 50d offline) and run DkNN on it.
# Usage: [RUN=name] scripts/train_and_dknn.sh DATASET MODEL [extra train flags...]
# Writes results/${RUN:-DATASET_MODEL}; skips training when its train_result.json exists.
# An unfinished run continues from its last epoch (--resume) when it has a snapshot, so
# a long chain of runs survives being stopped; one without a snapshot starts over.
# DkNN runs on the test and dev splits with exact faiss; DKNN_BACKEND=kdtree for the paper's.
set -euo pipefail
cd "$(dirname "$0")/.."
dataset=$1 model=$2; shift 2
out=results/${RUN:-${dataset}_${model}}
py=${PYTHON:-.venv/bin/python}
data=${DKNN_DATA_DIR:-../shared/data}
DKNN_FLAGS=(--backend "${DKNN_BACKEND:-faiss}")
if [ ! -f "$out/train_result.json" ]; then
  replace=--force
  [ -f "$out/snapshot_latest.npz" ] && replace=--resume
  for flag in "$@"; do [ "$flag" = --resume ] && replace=; done
  /usr/bin/time -f "peak_rss_kb %M wall_s %e" -o "$out.time" \
    "$py" train_text_classifier.py --dataset "$dataset" --model "$model" --data-dir "$data" \
      --word_vectors "$data/glove/glove.6B.50d.txt.gz" --out "$out" $replace "$@"
  mv "$out.time" "$out/time.txt"
fi
for split in test dev; do   # dev too: Table 1 shows both, so a gap is not one test set's noise
  [ -f "$out/dknn_${split}_${DKNN_BACKEND:-faiss}.json" ] ||
    "$py" run_dknn.py --model-setup "$out/args.json" --data-dir "$data" --split $split "${DKNN_FLAGS[@]}"
done
