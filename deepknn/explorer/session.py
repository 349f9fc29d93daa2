"""The explorer's model side: one loaded run answering the input view's questions.

`ExplorerSession.open` loads a result folder once: the model, the DkNN (its activation
and index caches reused; the folder's lock is held only while a missing cache is
written) and the temperature where scaling.py fitted one. Its answers are plain dicts of
JSON types, computed under one lock because a Chainer model is not thread-safe:

  predict(request)   softmax, temperature-scaled and DkNN predictions of one input, the
                     maps of every method the run supports, and its nearest training
                     examples in the last DkNN layer (or every layer)
  reduce(request)    Feng et al.'s input reduction, step by step

A request names its input: {'text': ...}, {'premise': ..., 'hypothesis': ...} for a
pair model, or {'split': ..., 'index': ...} for a stored example. New text is tokenized
as every command tokenizes new text for the run (model_setup.Setup.tokenize).
"""
import dataclasses
import functools
import os
import threading
from typing import Optional

import numpy as np

from deepknn.evaluation import calibration
from deepknn.neighbors import dknn as dknn_lib
from deepknn.neighbors import dknn_settings
from deepknn.models import model_setup
from deepknn.interpret import saliency
from deepknn.explorer import answers
from deepknn.explorer import editor
from deepknn.explorer import embedding
from deepknn.explorer import queries
from deepknn.explorer import searching
from deepknn.explorer import split_cache
from deepknn.feng import input_reduction
from deepknn.reports import saliency_report
from deepknn.interpret.saliency_scores import DEFAULT_NORMALIZATION, NORMALIZATIONS
from deepknn.attribution import from_layers
from deepknn.shift import trust as trust_lib
from nlp_utils import UserError

MAX_CHARACTERS = 1000      # per typed text field: a longer one is refused with a message
SPLITS = ('train', 'dev', 'calib', 'test')


@dataclasses.dataclass
class Settings:
    """How the explorer computes: the DkNN's settings (k, backend, batchsize: the one
    DkNNSettings, with its defaults) and the explorer's own, each with the command
    line's default."""
    dknn: dknn_settings.DkNNSettings = dataclasses.field(
        default_factory=dknn_settings.DkNNSettings)
    n_neighbors: int = 10         # training examples shown per layer
    trust: tuple = trust_lib.DEFAULT_TRUST   # trust scorers shown beside credibility
    # training-data attribution shown beside the neighbours (from_layers.FROM_LAYERS; None: none)
    attribution: Optional[str] = from_layers.DEFAULT
    max_characters: int = MAX_CHARACTERS
    reuse_evaluations: bool = True   # read split evaluations cached on disk (split_cache)
    gpu: int = -1
    data_dir: Optional[str] = None


def supported_methods(has_dknn, has_temperature):
    """Every registered interpretation method this run can compute, in registry order."""
    return tuple(name for name, cls in saliency.REGISTRY.items()
                 if (has_dknn or not cls.needs_dknn)
                 and (has_temperature or not cls.needs_temperature))


class StaleRun(UserError):
    """The run folder changed (retrained, replaced) after the session loaded it."""


def run_state(setup):
    """What identifies the run on disk: (inode, size, mtime) of its weights and args.json;
    a retrain, --force's swap included, changes it."""
    paths = (os.path.join(setup.result_dir, setup.config.model_path),
             os.path.join(setup.result_dir, 'args.json'))
    try:
        return [(s.st_ino, s.st_size, s.st_mtime_ns) for s in map(os.stat, paths)]
    except OSError:
        return None


class ExplorerSession:
    """A loaded run (setup, DkNN or None, temperature or None) and the lock that
    serialises every computation on its model."""

    def __init__(self, setup, dknn, temperature, settings):
        self.loaded_state = run_state(setup)
        self.description = model_setup.run_description(setup)   # of the weights loaded
        self.setup = setup
        self.dknn = dknn
        self.temperature = temperature
        self.settings = settings
        self.methods = supported_methods(dknn is not None, temperature is not None)
        self.trust = trust_lib.fitted_trust(setup, settings.dknn, settings.trust) \
            if dknn is not None else {}
        self.lock = threading.Lock()
        self.examples = {}          # name -> token-level examples shown in the dataset view
        self.tables = {}            # name -> its SplitTable, evaluated on first request
        self.training_views = {}    # shown split -> queries.training_view
        self.progress = {}          # name -> {'done', 'total'} blocks of a split being evaluated
        self.projections = {}       # DkNN layer -> embedding.layer_projection
        self.explainer = None       # from_layers.LayerAttribution, fitted on first use

    @classmethod
    def open(cls, model_setup_path, settings, purpose='explorer'):
        """Load the run once; the DkNN caches are written (under the folder's lock) only
        when missing or stale, so an explored folder is otherwise only read."""
        setup = model_setup.load_setup(model_setup_path, settings.gpu, settings.data_dir)
        dknn = None
        if setup.splits.calib:
            dknn = dknn_lib.dknn_from_setup(setup, settings.dknn)
        has_temperature = os.path.exists(os.path.join(setup.result_dir,
                                                      calibration.TEMPERATURE_FILE))
        temperature = calibration.load_temperature(setup.result_dir) if has_temperature \
            else None
        session = cls(setup, dknn, temperature, settings)
        for split in SPLITS:
            session.examples[split] = getattr(setup.splits, split)
        return session

    # ------------------------------------------------------------ describing the run
    def check_current(self):
        """StaleRun when the run folder no longer holds the weights this session loaded:
        answers would mix the old model with the new folder's name and files."""
        if run_state(self.setup) != self.loaded_state:
            raise StaleRun('{} was retrained or replaced after the explorer loaded it; '
                           'restart the explorer to explore the run it holds now'.format(
                               self.setup.result_dir), 'run')

    def info(self):
        """What the page shows about the run and what it may ask for."""
        config = self.setup.config
        return {'model': self.description,
                'dataset': config.dataset, 'model_type': config.model, 'pair': config.pair,
                'labels': list(self.setup.label_names), 'methods': list(self.methods),
                'k': self.settings.dknn.k if self.dknn else None,
                'layers': [answers.layer_name(i, self.dknn.n_layers)
                           for i in range(self.dknn.n_layers)] if self.dknn else [],
                'backend': self.settings.dknn.backend if self.dknn else None,
                'temperature': self.temperature, 'has_dknn': self.dknn is not None,
                'splits': {name: len(examples) for name, examples in self.examples.items()},
                'max_characters': self.settings.max_characters,
                'accuracy': {name: table.accuracy() for name, table in list(self.tables.items())},
                'legend': answers.legend(config.pair),
                'normalization': '{} ({})'.format(
                    DEFAULT_NORMALIZATION, NORMALIZATIONS[DEFAULT_NORMALIZATION])}

    def add_examples(self, name, examples):
        """Show token-level (tokens, label) `examples` (an evaluation file's) as `name`."""
        self.examples[name] = examples

    # ------------------------------------------------------------ dataset views
    def table(self, name):
        """The SplitTable of split (or evaluation file) `name`, evaluated once."""
        if name not in self.examples:
            raise UserError('split must be one of {}, got {!r}'.format(
                ', '.join(self.examples), name), 'split')
        with self.lock:
            if name not in self.tables:
                self.tables[name] = self._load_table(name)
            return self.tables[name]

    @functools.cached_property
    def cache_key(self):
        """split_cache.run_key of this session (the model's digest is read once)."""
        return split_cache.run_key(self.setup, self.settings.dknn, self.dknn is not None)

    def _load_table(self, name):
        """The SplitTable of `name` from the disk cache or a fresh evaluation, whose
        progress self.progress shows meanwhile."""
        examples = self.examples[name]
        if not examples:
            raise UserError('split {} has no examples; choose another split'.format(name),
                            'split')
        self.progress[name] = {'done': 0, 'total': None}
        try:
            columns, hidden = split_cache.split_columns(
                self.setup, self.dknn, self.settings.dknn, self.cache_key, name, examples,
                lambda done, total: self.progress.update({name: {'done': done, 'total': total}}),
                self.settings.reuse_evaluations)
        finally:
            del self.progress[name]
        return queries.SplitTable(name, examples, columns, self.setup, hidden)

    def training(self, name):
        """queries.training_view over the retrievals of split `name` (and dev's kNN rule)."""
        shown = self.table(name)
        dev = self.table('dev') if self.examples.get('dev') else None
        with self.lock:
            if name not in self.training_views:
                self.training_views[name] = queries.training_view(
                    self.setup, shown, dev, self.setup.splits.flipped_indices)
            return self.training_views[name]

    # ------------------------------------------------------------ inputs
    def resolve_input(self, request):
        """(tokens, gold label id or None, source) of a request; UserError naming the
        field when it is missing, too long, empty or of the wrong kind."""
        if not isinstance(request, dict):
            raise UserError('request: send a JSON object with "text" (or "premise" and '
                            '"hypothesis", or "split" and "index")', 'request')
        if 'split' in request or 'index' in request:
            return self._stored_example(request.get('split'), request.get('index'))
        config = self.setup.config
        fields = ('premise', 'hypothesis') if config.pair else ('text',)
        parts = tuple(self._text_field(request, name) for name in fields)
        tokenized = tuple(self.setup.tokenize(part.strip()) for part in parts)
        for name, part in zip(fields, tokenized):
            if not part:
                raise UserError('{} has no words; type a sentence'.format(name), name)
        return (tokenized if config.pair else tokenized[0]), None, None

    def _text_field(self, request, name):
        value = request.get(name)
        if not isinstance(value, str) or not value.strip():
            raise UserError('{} is missing: type a sentence{}'.format(
                name, ' (this model takes a premise and a hypothesis)'
                if self.setup.config.pair else ''), name)
        if len(value) > self.settings.max_characters:
            raise UserError('{} has {} characters, more than the limit of {}; shorten it'
                            .format(name, len(value), self.settings.max_characters), name)
        if '\t' in value or '\n' in value or '\x00' in value:
            raise UserError('{} holds a tab, a line break or a NUL character; type one line '
                            'of text'.format(name), name)
        return value

    def _stored_example(self, split, index):
        if split not in self.examples:
            raise UserError('split must be one of {}, got {!r}'.format(
                ', '.join(self.examples), split), 'split')
        examples = self.examples[split]
        if isinstance(index, bool) or not isinstance(index, int) \
                or not 0 <= index < len(examples):
            raise UserError('index must be an integer from 0 to {} (the {} examples of {}), '
                            'got {!r}'.format(len(examples) - 1, len(examples), split, index),
                            'index')
        tokens, label = examples[index]
        return tokens, label, {'split': split, 'index': index}

    # ------------------------------------------------------------ the input view
    def predict(self, request, all_layers=False):
        """The input view of one request (see the module docstring)."""
        tokens, gold, source = self.resolve_input(request)
        with self.lock, searching.one_search_thread():
            ids = self.setup.encode([(tokens, None)])[0][0]
            layers = dknn_lib.checked_activations(
                self.setup.model.layer_activations([ids], 1), 'input')
            trusted = trust_lib.trust_scores(self.trust, layers) if self.trust else {}
            dknn = searching.FirstQuery(self.dknn) if self.dknn else None
            maps = saliency.interpret_all(self.setup, self.methods, [(tokens, gold)],
                                          dknn, progress=False) if self.methods else {}
            result = dknn and dknn.full_input(layers)
        names = self.setup.label_names
        answer = {'input': self.describe_input(tokens, gold, source),
                  'softmax': answers.probabilities(calibration.softmax(layers[-1])[0], names),
                  'calibrated': None, 'dknn': None,
                  'maps': answers.map_views(maps, self.setup, names), 'neighbors': []}
        if self.temperature is not None:
            answer['calibrated'] = dict(answers.probabilities(
                calibration.softmax(layers[-1], self.temperature)[0], names),
                temperature=self.temperature)
        if result is not None:
            answer['dknn'] = dict(answers.probabilities(result['p_values'][0], names,
                                                        'p_values'),
                                  prediction=names[int(result['prediction'][0])],
                                  credibility=float(result['credibility'][0]),
                                  confidence=float(result['confidence'][0]),
                                  trust={name: float(scores[0])
                                         for name, scores in trusted.items()})
            answer['neighbors'] = self.neighbor_views(result, all_layers)
            answer['attribution'] = self.attribution_view(layers)
        return answer

    def attribution_view(self, layers):
        """The training examples that most support the softmax prediction of one input
        (layers: its DkNN layers), by settings.attribution; None without one."""
        if self.settings.attribution is None:
            return None
        with self.lock:
            if self.explainer is None:
                self.explainer = from_layers.LayerAttribution(
                    self.settings.attribution, self.dknn.train_activations,
                    [label for _, label in self.examples['train']], self.settings.dknn.k)
            prediction = int(np.argmax(layers[-1][0]))
            ids, scores = self.explainer.top(layers, [prediction], self.settings.n_neighbors)
        return answers.attribution_view(self.settings.attribution, ids[0], scores[0],
                                        prediction, self.examples['train'], self.setup)

    def describe_input(self, tokens, gold, source):
        vocab = self.setup.vocab
        premise, words = tokens if isinstance(tokens, tuple) else (None, tokens)
        return {'text': saliency_report.example_text(tokens, vocab),
                'editable': {'text': editor.editable_text(words)} if premise is None else
                {'premise': editor.editable_text(premise),
                 'hypothesis': editor.editable_text(words)},
                'words': saliency_report.display_tokens(words, vocab),
                'premise': None if premise is None else
                saliency_report.display_tokens(premise, vocab),
                'unknown': [t for part in (premise or [], words) for t in part if t not in vocab],
                'pieces': answers.word_pieces(self.setup.model, words),
                'premise_pieces': None if premise is None else
                answers.word_pieces(self.setup.model, premise),
                'gold': None if gold is None else self.setup.label_names[gold],
                'source': source}

    def neighbor_views(self, result, all_layers):
        """The nearest training examples of one input in the last layer (or every layer):
        [{'layer', 'name', 'items': [{index, text, label, distance, agrees}]}], where
        agrees tells whether the example's label is the DkNN prediction."""
        train = self.examples['train']
        n_layers = result['neighbors'].shape[1]
        prediction = int(result['prediction'][0])
        views = []
        for layer in (range(n_layers) if all_layers else [n_layers - 1]):
            items = []
            for index, distance in zip(result['neighbors'][0, layer][:self.settings.n_neighbors],
                                       result['neighbor_distances'][0, layer]):
                if index < 0:
                    continue
                tokens, label = train[index]
                items.append({'index': int(index), 'label': self.setup.label_names[label],
                              'text': saliency_report.example_text(tokens, self.setup.vocab),
                              'distance': float(distance), 'agrees': int(label) == prediction})
            views.append({'layer': layer, 'name': answers.layer_name(layer, n_layers),
                          'items': items})
        return views

    def edit(self, original, edited, all_layers=False):
        """The example editor: {'before', 'after' (input views), 'diff' (editor.diff)} of
        a stored example (a request) and its edited text (another request)."""
        before = self.predict(original, all_layers)
        after = self.predict(edited, all_layers)
        return {'before': before, 'after': after, 'diff': editor.diff(before, after)}

    # ------------------------------------------------------------ embedding view
    def embedding(self, layer):
        """embedding.points of DkNN layer `layer` (the training split evaluated first)."""
        train = self.table('train')
        projection, layer = self._projection(layer)
        return embedding.points(projection, train, layer,
                                answers.layer_name(layer, self.dknn.n_layers))

    def _projection(self, layer):
        """(embedding.layer_projection, layer number) of a requested layer, kept."""
        if self.dknn is None:
            raise UserError('the embedding view needs a DkNN: re-train with `n_calib` > 0',
                            'layer')
        layer = embedding.check_layer(layer, self.dknn.n_layers)
        with self.lock:
            if layer not in self.projections:
                self.projections[layer] = embedding.layer_projection(
                    self.setup, self.settings.dknn, self.cache_key, layer)
        return self.projections[layer], layer

    def embed_query(self, request, layer):
        """{'point': [x, y], 'neighbors': [training indices]} of one input in layer `layer`."""
        projection, layer = self._projection(layer)
        tokens, _, _ = self.resolve_input(request)
        with self.lock:
            ids = self.setup.encode([(tokens, None)])[0][0]
            layers = dknn_lib.checked_activations(
                self.setup.model.layer_activations([ids], 1), 'input')
            result = self.dknn.predict_from_activations(layers)
        nearest = result['neighbors'][0, layer][:self.settings.n_neighbors]
        return {'point': embedding.query_point(layers, projection, layer),
                'neighbors': [int(i) for i in nearest if i >= 0]}

    # ------------------------------------------------------------ input reduction
    def reduce(self, request, importance='gradient'):
        """Input reduction of one request: after each step the best beam item (kept word
        positions; beam search may change which words an item keeps) with f(prediction |
        kept words) of the classifier that decides what is kept."""
        usable = supported_methods(self.dknn is not None, self.temperature is not None)
        if importance not in usable:
            raise UserError('importance must be one of {}, got {!r}'.format(
                ', '.join(usable), importance), 'importance')
        tokens, gold, _ = self.resolve_input(request)
        steps = []

        def record(state):
            best = state.beams[0][0]
            if not steps or len(best) < len(steps[-1][0]):
                steps.append((best, state.beam_scores[0][0]))
        with self.lock:
            reducer = input_reduction.make_reducer(importance, self.setup, self.dknn,
                                                   batchsize=self.settings.dknn.batchsize,
                                                   temperature=self.temperature)
            reduction, = reducer.reduce([(tokens, gold)], on_step=record)
        vocab = self.setup.vocab
        return {'importance': importance,
                'prediction': self.setup.label_names[reduction.prediction],
                'premise': None if reduction.premise is None else
                saliency_report.display_tokens(reduction.premise, vocab),
                'words': saliency_report.display_tokens(reduction.original, vocab),
                'steps': [{'kept': list(range(len(reduction.original))),
                           'score': reduction.score_before}] +
                [{'kept': [int(p) for p in kept], 'score': float(score)}
                 for kept, score in steps]}
