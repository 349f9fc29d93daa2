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

# Table 1 (CNN on all five datasets, BiLSTM on SST) and the figures; hours on 2 CPU cores.
table1: venv
	for d in stsa.binary custrev TREC mpqa subj; do scripts/train_and_dknn.sh $$d cnn; done
	scripts/train_and_dknn.sh stsa.binary bilstm --epoch 5
	$(PY) paper_results.py --overwrite table1
	$(PY) paper_results.py --overwrite reliability --run stsa.binary_cnn

paper: table1
