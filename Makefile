# Fresh machine: `make demo` (main job) and `make test` (tests) create .venv themselves.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
DKNN_DATA_DIR ?= $(abspath ../shared/data)
export DKNN_DATA_DIR

$(VENV)/installed: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q "setuptools<70" wheel
	$(PY) -m pip install -q --no-build-isolation -r requirements.txt
	touch $@

.PHONY: venv demo test
venv: $(VENV)/installed

# Small default: CNN on TREC with GloVe 50d, then DkNN and interpretations.
demo: venv
	$(PY) train_text_classifier.py --dataset TREC --model cnn --epoch 3 --unit 120 \
	    --word_vectors $(DKNN_DATA_DIR)/glove/glove.6B.50d.txt.gz --out results/demo_TREC_cnn --force

test: venv
	$(PY) -m pytest -q tests
