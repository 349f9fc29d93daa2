"""The explorer's metrics panel: accuracy, confusion matrix and reliability diagram of a split.

`split_metrics(table)` gives, for the softmax and (where the run has one) the DkNN, the
accuracy over the split's examples, the confusion matrix (rows the gold label, columns
the prediction, as scikit-learn's confusion_matrix) and the reliability diagram of
calibration.reliability_curve: the softmax's top probability, and the DkNN's credibility
(the paper's measure of trust), against correctness, with the binned calibration error.
"""
import numpy as np

from deepknn.evaluation import calibration

N_BINS = 10


def confusion(gold, predicted, n_classes):
    """(C, C) counts: [i][j] examples of gold label i predicted as j."""
    matrix = np.zeros((n_classes, n_classes), dtype=np.int64)
    np.add.at(matrix, (gold, predicted), 1)
    return matrix


def classifier_metrics(name, score_name, gold, predicted, scores, n_classes):
    """{'name', 'score', 'accuracy', 'confusion', 'reliability': {'bins': [...], 'ece'}} of
    one classifier's (N,) predictions and (N,) scores in [0, 1]."""
    correct = predicted == gold
    curve = calibration.reliability_curve(name, scores, correct, N_BINS)
    bins = curve['bins']
    return {'name': name, 'score': score_name, 'accuracy': float(np.mean(correct)),
            'n_correct': int(correct.sum()),
            'confusion': confusion(gold, predicted, n_classes).tolist(),
            'reliability': {'ece': curve['ece'], 'bins': [
                {'low': float(low), 'high': float(high), 'count': int(count),
                 'accuracy': None if count == 0 else float(accuracy),
                 'mean_score': None if count == 0 else float(mean)}
                for low, high, count, accuracy, mean in zip(
                    bins['bin_lower'], bins['bin_upper'], bins['count'], bins['accuracy'],
                    bins['mean_confidence'])]}}


def split_metrics(table):
    """The metrics panel of a queries.SplitTable: {'split', 'n', 'labels', 'classifiers'}."""
    n_classes = len(table.label_names)
    found = [classifier_metrics('softmax', 'top softmax probability', table.gold,
                                table.softmax_prediction, table.softmax_probability, n_classes)]
    if table.dknn_prediction is not None:
        found.append(classifier_metrics('DkNN', 'credibility', table.gold,
                                        table.dknn_prediction, table.credibility, n_classes))
    return {'split': table.name, 'n': int(len(table.gold)), 'labels': list(table.label_names),
            'classifiers': found}
