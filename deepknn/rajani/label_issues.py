"""cleanlab's confident learning on the same flipped training sets as the kNN rule.

cleanlab (Northcutt et al. 2021) is what a user would pick to find mislabeled examples.
It needs out-of-sample predicted probabilities for every training example; we give it
two kinds, both computed from the fine-tuned model's training representations (the
layer the kNN searches, normalised as in knn_representations):

- kNN from features, as cleanlab's Datalab does when it gets features and no
  probabilities: the uniform vote of each example's k = 10 nearest other training
  examples (Datalab: sklearn's KNeighborsClassifier with k + 1 neighbours, then the
  example's own vote removed; the same numbers, searched here with faiss);
- a logistic regression, 5-fold cross-validated: cleanlab's recommended recipe, with
  a cheap model on the frozen representations standing in for 5 fine-tunes.

Either way the representations come from a model fine-tuned on all (noisy) training
labels, so the probabilities are out-of-sample for the probe, not for the encoder.
"""
import numpy as np
from cleanlab.filter import find_label_issues
from cleanlab.rank import get_label_quality_scores
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold, cross_val_predict

from deepknn.rajani import knn_representations as knn

DATALAB_K = 10      # Datalab's LabelIssueManager default
CV_FOLDS = 5        # cleanlab's tutorials' cross-validation folds
KNN_FROM_FEATURES = 'cleanlab, kNN from features'
CV_PROBE = 'cleanlab, cross-validated probe'


def knn_vote_proba(classifier, train_vectors, k=DATALAB_K):
    """Datalab's probabilities from features: (N, C), row i the uniform vote of the k
    nearest training examples other than i. train_vectors: the (N, D) training
    activations the classifier was built from, in order."""
    neighbors = classifier.neighbors(train_vectors, k, leave_self_out=True)
    return knn.knn_probabilities(neighbors, classifier.n_class, np.inf)


def cross_validated_proba(classifier, train_vectors, seed=0, folds=CV_FOLDS):
    """(N, C) probabilities of a logistic regression on the normalised representations,
    each row from the fold that did not train on it. Folds are stratified; a class with
    fewer than `folds` examples lowers the fold count (at least 2)."""
    labels = classifier.labels
    smallest = np.bincount(labels, minlength=classifier.n_class).min()
    splitter = StratifiedKFold(max(2, min(folds, smallest)), shuffle=True, random_state=seed)
    probe = LogisticRegression(max_iter=1000)
    return cross_val_predict(probe, classifier.normalizer(train_vectors), labels, cv=splitter,
                             method='predict_proba')


def confident_learning(labels, pred_probs):
    """cleanlab's label issues for (N,) labels and (N, C) out-of-sample probabilities.
    Returns (flagged training indices, sorted; all N indices ranked most suspicious first
    by cleanlab's label-quality score, ties to the smaller index)."""
    labels = np.asarray(labels, dtype=np.int64)
    flagged = np.flatnonzero(find_label_issues(labels, pred_probs, n_jobs=1))
    quality = get_label_quality_scores(labels, pred_probs)
    return flagged, np.lexsort((np.arange(len(labels)), quality))


def cleanlab_methods(classifier, train_vectors, seed=0):
    """{method name: (flagged indices, ranking)} for both kinds of probabilities."""
    return {name: confident_learning(classifier.labels, proba(classifier, train_vectors))
            for name, proba in (
                (KNN_FROM_FEATURES, knn_vote_proba),
                (CV_PROBE, lambda c, v: cross_validated_proba(c, v, seed)))}
