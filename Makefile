# Fresh machine: `make demo` (main job) and `make test` (tests) create .venv themselves.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
DKNN_DATA_DIR ?= $(abspath ../shared/data)
GLOVE := $(DKNN_DATA_DIR)/glove/glove.6B.50d.txt.gz
DEMO := results/demo_sst_cnn

$(VENV)/installed: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q "setuptools<70" wheel
	$(PY) -m pip install -q --no-build-isolation -r requirements.txt
	touch $@

.PHONY: venv demo test table1 paper
venv: $(VENV)/installed

# Small default: a CNN on SST-2 (5 epochs), its DkNN, and saliency maps of 20 test sentences.
demo: venv
	$(PY) train_text_classifier.py --dataset stsa.binary --model cnn --epoch 5 \
	    --data-dir $(DKNN_DATA_DIR) --word_vectors $(GLOVE) --out $(DEMO) --force
	$(PY) run_dknn.py --model-setup $(DEMO)/args.json
	$(PY) scaling.py --model-setup $(DEMO)/args.json
	$(PY) interpretations.py --model-setup $(DEMO)/args.json --split test --limit 20 \
	    --methods conformity,confidence,calibrated,gradient \
	    --output $(DEMO)/interpretations.html --png $(DEMO)/interpretations.png

test: venv
	$(PY) -m pytest -q tests

# Table 1: the CNN with 3 seeds and both vocabularies, the BiLSTM (10 epochs, best dev
# epoch kept), on all five datasets, plus the figures. Hours on 2 CPU cores; every run
# is resumable, so rerunning `make table1` continues where it stopped.
TABLE1_DATASETS := stsa.binary custrev TREC mpqa subj
table1: venv
	for d in $(TABLE1_DATASETS); do \
	  scripts/train_and_dknn.sh $$d cnn && \
	  RUN=$${d}_cnn_seed1 scripts/train_and_dknn.sh $$d cnn --seed 1 && \
	  RUN=$${d}_cnn_seed2 scripts/train_and_dknn.sh $$d cnn --seed 2 && \
	  RUN=$${d}_cnn_trainvocab scripts/train_and_dknn.sh $$d cnn --vocab train || exit 1; \
	done
	for d in $(TABLE1_DATASETS); do scripts/train_and_dknn.sh $$d bilstm --epoch 10 || exit 1; done
	$(PY) paper_results.py --overwrite table1
	$(PY) paper_results.py --overwrite reliability --run stsa.binary_cnn

paper: table1
