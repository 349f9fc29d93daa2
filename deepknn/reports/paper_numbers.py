"""Every published number the reports print beside ours, each defined once, with its source.

Wallace et al. 2018 (the paper reproduced), Rajani et al. 2020 (kNN representations) and
Feng et al. 2018 (pathologies of neural models); the texts are in ../shared/papers/.
"""

# ---------------------------------------------------------------- Wallace et al. 2018
# Table 1 (GloVe 840B 300d): (softmax, DkNN) test accuracy in percent; SNLI from section
# 4's text (BiLSTM only, trained on the full train split).
TABLE1 = {
    'bilstm': {'SST': (86.7, 86.6), 'CR': (82.7, 82.5), 'TREC': (91.5, 91.3),
               'MPQA': (88.9, 88.6), 'SUBJ': (94.8, 94.9), 'SNLI': (81.2, 81.0)},
    'cnn': {'SST': (85.7, 85.8), 'CR': (83.3, 83.4), 'TREC': (92.8, 92.4),
            'MPQA': (89.1, 88.7), 'SUBJ': (93.5, 93.1), 'SNLI': ('', '')},   # no SNLI CNN
}
# Section 5.1: mean highlighted words per SST test sentence (BiLSTM).
HIGHLIGHTS = {'gradient': 5.32, 'confidence': 5.79, 'conformity': 3.65}
# Section 5.1: average rank of 'terribly' (1 = most negative) over 66 paraphrases.
TERRIBLY = {'conformity': 7.9, 'confidence': 1.68, 'gradient': 1.1}
# Table 4: top SNLI artifacts (Gururangan et al. 2018) and their average importance rank
# (1 = most important) under (conformity, confidence) leave-one-out.
ARTIFACTS = {
    'entailment': {'outdoors': (2.93, 3.26), 'least': (2.22, 4.41), 'instrument': (3.57, 4.47),
                   'outside': (4.08, 4.80), 'animal': (2.00, 4.73)},
    'neutral': {'tall': (1.09, 2.61), 'first': (2.14, 2.99), 'competition': (2.33, 5.56),
                'sad': (1.39, 1.79), 'favorite': (1.69, 3.89)},
    'contradiction': {'nobody': (1.00, 1.00), 'sleeping': (1.64, 2.34), 'no': (2.53, 5.74),
                      'tv': (1.92, 3.74), 'cat': (1.42, 3.62)},
}

# ---------------------------------------------------------------- Rajani et al. 2020
# Table 4 (cad-snli original) and Table 5 (augmented): (BERT, kNN-BERT) accuracy in %.
BACKOFF = {'cad-snli': (75.7, 75.8), 'cad-snli-augmented': (70.5, 71.0)}
BACKOFF_TAU = {'cad-snli': 0.74, 'cad-snli-augmented': 0.53}        # BERT's tuned tau
# Figure 4 / section 5: mislabeled-example detection with BERT on cad-snli, 10% flipped.
DETECTION = {'precision': 0.84, 'recall': 0.73, 'f1': 0.78}
# ... and the training-loss ranking 'requires about 65% of the training data' to match it.
DETECTION_LOSS_FRACTION = 0.65
# Section 5: share of training hypotheses with 'not' that are labelled contradiction,
# (original split, augmented split); the text says 'the pattern occurs 37% and 60% of times'.
NEGATION_CONTRADICTION = (0.37, 0.60)
# ... and BERT's accuracy on entailment examples with a negation 'drops by 10%' (points)
# when trained on the augmented split instead of the original.
NEGATION_ENTAILMENT_DROP = 10
# Section 4: accuracy drop after removing the most retrieved vs random training examples
# (fraction removed: (most retrieved, random)), BERT, original split.
REMOVAL_DROPS = {0.1: (4.6, 1.2), 0.3: (10.6, 5.2)}

# ---------------------------------------------------------------- Feng et al. 2018
# Table 2 (SNLI, BIMPM): before / after entropy fine-tuning.
ENTROPY = {'accuracy': (85.71, 85.72), 'reduced_length': (1.50, 2.20)}
# "Reduced length / Before" (gradient importance); the paper has no SST number: blank.
REDUCED_LENGTH = {'snli': 1.50, 'cad-snli': 1.50}
# Table 4's ANLI and HANS columns (k=64): (model, kNN-model) test accuracy (%) per encoder,
# models trained on ANLI's 162,865 pairs; Table 5's tau for them.
ROBUSTNESS = {'BERT': ({'anli': 47.2, 'hans': 52.4}, {'anli': 48.5, 'hans': 52.4}),
              'RoBERTa': ({'anli': 44.4, 'hans': 59.3}, {'anli': 47.9, 'hans': 59.6})}
ROBUSTNESS_TAU = {'BERT': {'anli': 0.95, 'hans': 0.84}, 'RoBERTa': {'anli': 0.96, 'hans': 0.62}}
# Table 6: HANS not-entail accuracy (%) per heuristic, (model, kNN-model).
HANS_NOT_ENTAIL = {
    'BERT': {'lexical_overlap': (23.3, 25.4), 'subsequence': (30.6, 30.6),
             'constituent': (18.2, 24.6)},
    'RoBERTa': {'lexical_overlap': (78.7, 79.4), 'subsequence': (79.6, 80.8),
                'constituent': (52.7, 54.7)}}
