"""Interpretation methods: one importance per word, as in sections 2, 3.3, 5 and 6.2.

One class per method behind one interface (`Interpreter.interpret`: examples in,
`Interpretation`s with plain arrays out). Each class registers itself in REGISTRY
(name -> class) when it is defined, and carries its own facts: `name`, a one-line
`description` (for --help), `score_meaning` (what Interpretation.score is, for the
reports), `needs_dknn`, `needs_temperature` and `from_setup`. Everything else
(parse_methods, plan_methods, make_interpreter, interpret_all, the command lines and
the reports)
reads the registry, so adding a method is one class:

    class ConstantLOO(saliency.LeaveOneOut):       # or Interpreter, for a non-LOO method
        name = 'constant'
        description = 'leave-one-out with a constant f (every word 0)'
        def class_scores(self, outputs):
            n = len(outputs.rows)
            return np.ones((n, 2)), np.zeros(n, dtype=int)

Define it in this file (or in a module imported before the registry is read); it is
listed after the methods defined before it.

Every method takes an input and gives one importance value per token; a positive
value means the token supports the prediction of the method's classifier f.

  conformity   leave-one-out (Eq. 1) with f = the DkNN conformity vector (fraction of
               the neighbours over all layers with label j, section 3.3). y is the DkNN
               prediction; since p-values fall as conformity rises, that is the argmax
               of the conformity (ties to the smaller class id).
  confidence   leave-one-out with f = the softmax probability (section 2.1).
  calibrated   leave-one-out with f = the temperature-scaled softmax (section 6.2);
               needs temperature.json from scaling.py.
  gradient     -(dL/de_t) . e_t with L the cross-entropy at the softmax prediction
               (section 2.2); the minus sign makes positive mean "supports".
  credibility  leave-one-out with f = the DkNN p-values, i.e. calibrated conformity
               (section 6.2); f(y | x) for the DkNN prediction y is the credibility.

Leave-one-out (rows, chunks, Eq. 1, edge cases) is in leave_one_out.py; a one-token
input has NaN leave-one-out importance, but a gradient. Normalisation, highlight counts
and ranks of the maps are in saliency_scores.py; rendering in reports/saliency_report.py.
"""
import collections

from deepknn.neighbors import dknn as dknn_lib
from deepknn.neighbors import dknn_settings
import numpy as np
from deepknn.evaluation import calibration
from deepknn import registry
from deepknn.interpret.leave_one_out import (DEFAULT_BATCHSIZE, Interpretation, chunked_rows,
                                   full_input, run_leave_one_out, split_example)
from nlp_utils import UserError

DEFAULT_METHODS = ('conformity', 'confidence', 'gradient')   # the paper's Table 2
# What the map studies (faithfulness, plausibility) measure by default, and the paired
# differences each reports: (method, compared with).
STUDY_METHODS = ('conformity', 'confidence', 'calibrated', 'credibility', 'gradient')
STUDY_PAIRS = (('conformity', 'confidence'), ('conformity', 'gradient'))

# name -> Interpreter subclass, in the order the classes were defined (the order of
# --help and of error messages).
REGISTRY = registry.Registry('interpretation method')


class Interpreter(REGISTRY.Registered):
    """An input in, one importance value per token out (see the module docstring).
    A subclass that sets `name` (and a one-line `description`, shown in --help)
    registers itself in REGISTRY (deepknn/registry.py); one without is abstract."""
    score_meaning = 'the score of the prediction'   # what Interpretation.score is
    needs_dknn = False           # from_setup needs a fitted, calibrated DkNN
    needs_temperature = False    # from_setup reads temperature.json (from scaling.py)

    def __init__(self, model, vocab):
        self.model = model
        self.vocab = vocab

    @classmethod
    def from_setup(cls, setup, dknn=None, temperature=None):
        """This method's interpreter for a loaded setup (model_setup.Setup or anything
        with .model, .vocab, .result_dir); `dknn` is a DkNN whenever needs_dknn;
        `temperature` is T, already read from temperature.json, or None."""
        return cls(setup.model, setup.vocab)

    def interpret(self, examples, batchsize=DEFAULT_BATCHSIZE, progress=None):
        """examples: list of (tokens, label) (label may be None) -> list of Interpretation.
        `progress`: a description for a progress bar over examples, or None."""
        raise NotImplementedError


class LeaveOneOut(Interpreter):
    """Eq. 1 with the classifier f given by `class_scores`; subclasses only choose f.
    interpret_all runs all LeaveOneOut methods it is asked for over the same chunks."""

    def class_scores(self, outputs):
        """ChunkOutputs of M rows -> (f values (M, C) floats, predictions of f (M,))."""
        raise NotImplementedError

    def interpret(self, examples, batchsize=DEFAULT_BATCHSIZE, progress=None):
        return run_leave_one_out([self], examples, batchsize, progress)[0]


# The classes below are defined in the order methods are listed (REGISTRY order).
class ConformityLOO(LeaveOneOut):
    """f = the DkNN conformity vector, y = the DkNN prediction (section 3.3)."""
    name = 'conformity'
    description = 'leave-one-out with the DkNN conformity (section 3.3)'
    score_meaning = 'fraction of the DkNN neighbours (all layers) with the predicted label'
    needs_dknn = True
    dknn_key = 'conformity'

    def __init__(self, model, vocab, dknn):
        super().__init__(model, vocab)
        self.dknn = dknn

    @classmethod
    def from_setup(cls, setup, dknn=None, temperature=None):
        return cls(setup.model, setup.vocab, dknn)

    def class_scores(self, outputs):
        result = outputs.dknn_result(self.dknn)
        return result[self.dknn_key], result['prediction']


class ConfidenceLOO(LeaveOneOut):
    """f = softmax(logits / T) with T = 1 (section 2.1)."""
    name = 'confidence'
    description = 'leave-one-out with the softmax confidence (section 2.1)'
    score_meaning = 'softmax probability of the predicted label'
    temperature = 1.0

    def class_scores(self, outputs):
        probabilities = calibration.softmax(outputs.logits, self.temperature)
        return probabilities, probabilities.argmax(axis=1)


class CalibratedConfidenceLOO(ConfidenceLOO):
    """f = temperature-scaled softmax (section 6.2); T leaves the prediction unchanged."""
    name = 'calibrated'
    description = ('leave-one-out with the temperature-scaled softmax (section 6.2; '
                   'needs the run\'s fitted temperature.json)')
    score_meaning = 'temperature-scaled softmax probability of the predicted label'
    needs_temperature = True

    def __init__(self, model, vocab, temperature):
        super().__init__(model, vocab)
        self.temperature = temperature

    @classmethod
    def from_setup(cls, setup, dknn=None, temperature=None):
        """`temperature`: T as a MethodPlan read it (None: read temperature.json now)."""
        if temperature is None:
            temperature = calibration.load_temperature(setup.result_dir)
        return cls(setup.model, setup.vocab, temperature)


class Gradient(Interpreter):
    """-(dL/de_t) . e_t, L = cross-entropy at the softmax prediction (section 2.2);
    the '<eos>' position is dropped. prediction/score: softmax argmax and probability."""
    name = 'gradient'
    description = 'minus the loss gradient times each word embedding (section 2.2)'
    score_meaning = 'softmax probability of the predicted label'

    def interpret(self, examples, batchsize=DEFAULT_BATCHSIZE, progress=None):
        split = [split_example(tokens, self.model.pair) for tokens, _ in examples]
        rows = [[full_input(premise, words, self.vocab)] for premise, words in split]
        results = [None] * len(examples)
        for chunk in chunked_rows(rows, batchsize, progress):
            inputs = [row for _, _, row in chunk]
            probabilities = calibration.softmax(self.model.predict_logits(inputs, len(inputs)))
            predicted = probabilities.argmax(axis=1)
            gradients = self.model.input_gradients(inputs, predicted, len(inputs))
            for (owner, _, _), p, y, gradient in zip(chunk, probabilities, predicted, gradients):
                premise, words = split[owner]
                results[owner] = Interpretation(
                    words, -gradient[:-1].astype(np.float64), int(y), float(p[y]),
                    examples[owner][1], premise)
        return results


class CredibilityLOO(ConformityLOO):
    """f = the DkNN p-values (calibrated conformity, section 6.2)."""
    name = 'credibility'
    description = ('leave-one-out with the DkNN credibility, i.e. calibrated conformity '
                   '(section 6.2)')
    score_meaning = 'DkNN credibility: the calibrated p-value of the predicted label'
    dknn_key = 'p_values'


# ---------------------------------------------------------------- choosing methods
def parse_methods(methods, argument='methods'):
    """'a,b' or a list -> tuple of distinct registered method names, in the order given;
    UserError if one is unknown or none is given. `argument`: what the message calls
    the value (a command line passes its flag)."""
    return REGISTRY.parse(methods, argument)


class MethodPlan(collections.namedtuple('MethodPlan', 'methods temperature notes')):
    """What a --methods list asks for, worked out once: `methods` (registered names, in
    order, distinct), `temperature` (T of temperature.json, read once, where one of them
    needs_temperature; else None) and `notes` (methods left out, one line each)."""

    @property
    def needs_dknn(self):
        return needs_dknn(self.methods)


def plan_methods(methods, result_dir, optional=(), argument='methods'):
    """The MethodPlan of `methods` ('a,b' or a list; a MethodPlan is returned as it is)
    for the run in `result_dir`. A method needing a missing temperature.json is a
    UserError naming scaling.py, unless it is in `optional` (methods nobody named, e.g.
    defaults): then it is left out with a note; none left is a UserError."""
    if isinstance(methods, MethodPlan):
        return methods
    methods = parse_methods(methods, argument)
    if not needs_temperature(methods):
        return MethodPlan(methods, None, ())
    try:
        return MethodPlan(methods, calibration.load_temperature(result_dir), ())
    except UserError as error:
        missing = [m for m in methods if REGISTRY[m].needs_temperature]
        named = [m for m in missing if m not in optional]
        if named:
            raise UserError('{}: {} needs the temperature: {}, or leave {} out'.format(
                argument, named[0], error, named[0]))
        kept = tuple(m for m in methods if m not in missing)
        if not kept:
            raise UserError('{}: none of {} can run ({})'.format(
                argument, ', '.join(methods), error))
        return MethodPlan(kept, None, tuple('{} left out: {}'.format(m, error)
                                            for m in missing))


def describe_methods():
    """'name: description; ...' over the registry, for --help."""
    return REGISTRY.describe()


def needs_dknn(methods):
    """Whether any of `methods` needs a DkNN."""
    return any(REGISTRY[m].needs_dknn for m in parse_methods(methods))


def needs_temperature(methods):
    """Whether any of `methods` reads temperature.json."""
    return any(REGISTRY[m].needs_temperature for m in parse_methods(methods))


def make_interpreter(method, setup, dknn=None, temperature=None):
    """The Interpreter of a registered `method` for a loaded setup (model_setup.Setup or
    anything with .model, .vocab, .result_dir). A method that needs_dknn gets `dknn`, or
    a DkNN with the default DkNNSettings (exact faiss, k=75) when `dknn` is None; one that
    needs_temperature gets `temperature` (None: it reads temperature.json)."""
    cls = REGISTRY[parse_methods([method], 'method')[0]]
    if cls.needs_dknn and dknn is None:
        dknn = dknn_lib.dknn_from_setup(setup, dknn_settings.DkNNSettings())
    return cls.from_setup(setup, dknn, temperature)


def interpret_all(setup, methods, examples, dknn=None, batchsize=DEFAULT_BATCHSIZE,
                  progress=True):
    """{method: [Interpretation] over `examples`} for every method in `methods` (names or
    a MethodPlan), in order.

    The registry decides what is built: temperature.json is read first when a method
    needs_temperature and `methods` is no MethodPlan that read it already (a missing one
    fails before the slow DkNN build), and the DkNN is
    built (once) only when a method needs_dknn and `dknn` is None. All LeaveOneOut
    methods share one pass over the rows; any other method runs on its own.
    Progress bars count rows.
    """
    plan = plan_methods(methods, setup.result_dir)
    methods = plan.methods
    if dknn is None and plan.needs_dknn:
        dknn = dknn_lib.dknn_from_setup(setup, dknn_settings.DkNNSettings())
    interpreters = {m: make_interpreter(m, setup, dknn, plan.temperature) for m in methods}
    loo = [m for m in methods if isinstance(interpreters[m], LeaveOneOut)]
    results = {}
    if loo:
        description = 'leave-one-out ({})'.format(', '.join(loo)) if progress else None
        maps = run_leave_one_out([interpreters[m] for m in loo], examples, batchsize, description)
        results.update(zip(loo, maps))
    for m in methods:
        if m not in results:
            results[m] = interpreters[m].interpret(examples, batchsize, m if progress else None)
    return {m: results[m] for m in methods}


def nearest_training_examples(model, dknn, train_examples, examples, n, vocab,
                              batchsize=DEFAULT_BATCHSIZE):
    """Interpretation by analogy (section 6.4): for each example, its `n` nearest
    training examples (tokens, label) in the final DkNN layer, nearest first.
    train_examples are the token-level examples the DkNN indexed, in order."""
    inputs = []
    for tokens, _ in examples:
        premise, words = split_example(tokens, model.pair)
        inputs.append(full_input(premise, words, vocab))
    final_layer = model.layer_activations(inputs, batchsize)[-1]
    _, neighbors = dknn.indexes[-1].search(final_layer, n)
    return [[train_examples[i] for i in row if i >= 0] for row in neighbors]
