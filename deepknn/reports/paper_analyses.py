"""The paper's interpretation analyses on a trained run: Table 2, the section 5.1
highlight counts and 'terribly' ranks (under each normalisation), and Table 4's SNLI
artifacts. Each takes an Analysis (a loaded run, its DkNN, an output stem and the
settings; deepknn/neighbors/trained_run.py loads the run) and writes one table or page.
"""
import dataclasses
from typing import Optional

import numpy as np

from deepknn.models import model_setup
import nlp_utils
from deepknn.interpret import saliency
from deepknn.reports import paper_numbers
from deepknn.reports import saliency_png
from deepknn.reports import saliency_report
from deepknn.interpret import saliency_scores
from nlp_utils import UserError
from deepknn.reports.tables import markdown_table, write_table

# Table 2's SST test sentences (as fragments of the tokenized, lowercased text).
TABLE2_FRAGMENTS = ['an intelligent fiction about learning through cultural clash',
                    'talented and terribly charismatic',
                    'diane lane shines in unfaithful']
TERRIBLY_REPLACEMENTS = ('awesome', 'wonderful', 'impressive')
TABLE2_METHODS = ['conformity', 'confidence', 'gradient']
ARTIFACT_METHODS = ['conformity', 'confidence']


@dataclasses.dataclass(frozen=True)
class Analysis:
    """What one analysis reads and where it writes: a loaded run (model_setup.Setup),
    its calibrated DkNN, the output stem (path without suffix), the line naming the
    command that produced it, and the analysis's settings: `batchsize` leave-one-out
    rows per model batch, the maps' `normalization`, the `positive_label` of the
    'terribly' analyses, and `limit` (the first N test sentences, None: all)."""
    setup: object
    dknn: object
    stem: str
    produced_by: str
    batchsize: int = 256
    normalization: str = saliency_scores.DEFAULT_NORMALIZATION
    positive_label: str = 'positive'
    limit: Optional[int] = None


def check_binary_sentiment(setup, positive_label):
    """The 'terribly' analyses need a binary single-sentence model with a positive class."""
    if setup.config.n_class != 2 or setup.model.pair:
        raise UserError("terribly applies to a binary sentiment model (the paper's SST); {} has "
                        "{} classes{}: choose the run of an SST model".format(
                            setup.result_dir, setup.config.n_class,
                            ' and sentence pairs' if setup.model.pair else ''))
    label_id(setup, positive_label, '`positive_label`')


def label_id(setup, name, what):
    """The class id of label `name`, or a UserError asking to check `what`."""
    if name not in setup.label_names:
        raise UserError('label {!r} is not one of this model\'s labels {}; check {}'.format(
            name, setup.label_names, what))
    return setup.label_names.index(name)


def provenance(setup, produced_by):
    """The model (run folder and weights hash) and the command (`produced_by`) of a table."""
    return 'Model: {} {} ({} epochs), {}. {}'.format(
        setup.config.dataset, setup.config.model, setup.config.epoch,
        model_setup.run_description(setup), produced_by)


def lowercase_text(tokens):
    return ' '.join(tokens).lower()


def table2(run):
    """The paper's Table 2 sentences under conformity, confidence and gradient."""
    setup = run.setup
    examples = []
    for fragment in TABLE2_FRAGMENTS:
        found = [ex for ex in setup.splits.test if fragment in lowercase_text(ex[0])]
        if not found:
            raise UserError('no test sentence contains {!r}'.format(fragment))
        examples.append(found[0])
    results = saliency.interpret_all(setup, TABLE2_METHODS, examples, run.dknn, run.batchsize)
    views = saliency_report.build_views(results, setup.vocab, setup.label_names,
                                        normalization=run.normalization)
    stem = run.stem
    title = 'Table 2. ' + provenance(setup, run.produced_by)
    rows = saliency_report.importance_rows(results, setup.vocab, setup.label_names,
                                           run.normalization)
    nlp_utils.atomic_write_files([saliency_report.html_write(views, stem + '.html', title),
                                  saliency_report.importances_write(rows, stem + '.csv')] +
                                 saliency_png.png_writes(views, stem + '.png', title))
    print('wrote {0}.html, {0}.png and {0}.csv'.format(stem))


def mean_or_none(values):
    values = [v for v in values if not np.isnan(v)]
    return round(float(np.mean(values)), 2) if values else None


def normalization_text(normalization):
    return 'Normalisation: {} ({}).'.format(normalization,
                                           saliency_scores.NORMALIZATIONS[normalization])


HIGHLIGHT_METHODS = ['gradient', 'confidence', 'calibrated', 'conformity']


def mean_highlighted(maps, normalization):
    """Average number of highlighted words over [Interpretation]; one-token sentences
    have no leave-one-out map (NaN) and are left out."""
    return mean_or_none([
        float(saliency_scores.highlighted(m.scores, normalization=normalization).sum())
        if not np.isnan(m.scores).any() else np.nan for m in maps])


def highlights(run):
    """Section 5.1 and 6.2: highlighted words per sentence over the whole test set."""
    setup = run.setup
    sentences = setup.splits.test[:run.limit]   # progress bars count the rows done
    results = saliency.interpret_all(setup, HIGHLIGHT_METHODS, sentences, run.dknn,
                                     run.batchsize)
    lengths = [len(maps.tokens) for maps in results['gradient']]
    rows = [{'method': method,
             'highlighted_words': mean_highlighted(results[method], run.normalization),
             'paper': paper_numbers.HIGHLIGHTS.get(method), 'sentences': len(results[method])}
            for method in HIGHLIGHT_METHODS]
    header = ('# Highlighted words per SST test sentence (|normalised importance| > 0.05)\n\n'
              'Average sentence length: {:.2f} words here, 20.23 in the paper. {} {}\n'.format(
                  np.mean(lengths), normalization_text(run.normalization),
                  provenance(setup, run.produced_by)))
    columns = ['method', 'highlighted_words', 'paper', 'sentences']
    write_table(run.stem, rows, columns, header)
    print(markdown_table(rows, columns))


def terribly_paraphrases(examples, positive_label):
    """For each 'great' in a positive sentence, three paraphrases with 'terribly <word>'
    in its place: [(tokens, label, position of 'terribly')]."""
    paraphrases = []
    for tokens, label in examples:
        if label != positive_label:
            continue
        for position, token in enumerate(tokens):
            if token.lower() == 'great':
                for word in TERRIBLY_REPLACEMENTS:
                    new = tokens[:position] + ['terribly', word] + tokens[position + 1:]
                    paraphrases.append((new, label, position))
    return paraphrases


TERRIBLY_METHODS = ['conformity', 'confidence', 'calibrated', 'gradient']


def terribly_maps(run):
    """(paraphrases, {method: [Interpretation]}) of the 'terribly' paraphrases of dev."""
    positive = label_id(run.setup, run.positive_label, '`positive_label`')
    paraphrases = terribly_paraphrases(run.setup.splits.dev, positive)
    if not paraphrases:
        raise UserError("no positive dev sentence contains 'great'")
    return paraphrases, saliency.interpret_all(
        run.setup, TERRIBLY_METHODS, [(tokens, label) for tokens, label, _ in paraphrases],
        run.dknn, run.batchsize)


def mean_terribly_rank(maps, paraphrases, positive, normalization):
    """Average rank of 'terribly' (1 = most negative) in the normalised maps, importance
    taken toward the positive class: for a binary task that is the map of a negative
    prediction with its sign flipped, so the ranks answer "does 'terribly' push toward
    negative?" whatever each method predicted."""
    return mean_or_none([saliency_scores.importance_ranks(saliency_scores.normalize(
        m.scores if m.prediction == positive else -m.scores, normalization))[position]
        for m, (_, _, position) in zip(maps, paraphrases)])


def terribly(run):
    """Section 5.1: average rank of the inserted 'terribly' (1 = most negative).

    Binary SST only (check_binary_sentiment): ranks are of the importance toward the
    positive class."""
    setup = run.setup
    positive = label_id(setup, run.positive_label, '`positive_label`')
    paraphrases, results = terribly_maps(run)
    rows = []
    for method in TERRIBLY_METHODS:
        predicted_positive = np.mean([m.prediction == positive for m in results[method]])
        rows.append({'method': method, 'average_rank': mean_terribly_rank(
                         results[method], paraphrases, positive, run.normalization),
                     'paper': paper_numbers.TERRIBLY.get(method), 'examples': len(paraphrases),
                     'predicted_positive': round(float(predicted_positive), 2)})
    header = ("# Average rank of 'terribly' (1 = most negative word)\n\n"
              "{} paraphrases (the paper: 66) of positive dev sentences with 'great' replaced "
              "by 'terribly awesome/wonderful/impressive'; importance toward the positive class "
              "(sign flipped where a method predicts negative). {} {}\n".format(
                  len(paraphrases), normalization_text(run.normalization),
                  provenance(setup, run.produced_by)))
    columns = ['method', 'average_rank', 'paper', 'examples', 'predicted_positive']
    write_table(run.stem, rows, columns, header)
    print(markdown_table(rows, columns))


def normalizations(run):
    """Section 5.1 highlight counts and 'terribly' ranks under every normalisation."""
    setup = run.setup
    positive = label_id(setup, run.positive_label, '`positive_label`')
    test_maps = saliency.interpret_all(setup, HIGHLIGHT_METHODS, setup.splits.test, run.dknn,
                                       run.batchsize)
    paraphrases, paraphrase_maps = terribly_maps(run)
    names = list(saliency_scores.NORMALIZATIONS)
    rows = []
    for method in HIGHLIGHT_METHODS:
        row = {'method': method}
        row.update({'highlighted_' + n: mean_highlighted(test_maps[method], n) for n in names})
        row['paper_highlighted'] = paper_numbers.HIGHLIGHTS.get(method)
        row.update({'terribly_rank_' + n: mean_terribly_rank(
            paraphrase_maps[method], paraphrases, positive, n) for n in names})
        row['paper_terribly_rank'] = paper_numbers.TERRIBLY.get(method)
        rows.append(row)
    columns = list(rows[0])
    header = ("# Section 5.1 under each normalisation of the maps\n\n"
              "highlighted_*: words per SST test sentence ({} sentences) with |normalised "
              "importance| > 0.05; terribly_rank_*: average rank of 'terribly' (1 = most "
              "negative) over {} dev paraphrases (the paper: 66). Normalisations: {}. The "
              "paper's numbers are for its BiLSTM. {}\n".format(
                  len(setup.splits.test), len(paraphrases), '; '.join(
                      '{} = {}'.format(n, d) for n, d in saliency_scores.NORMALIZATIONS.items()),
                  provenance(setup, run.produced_by)))
    write_table(run.stem, rows, columns, header)
    print(markdown_table(rows, columns))


def artifact_rows(setup, results):
    """Table 4 rows: per artifact word and method, the average importance rank
    (1 = most important) over examples predicted as the word's class whose
    hypothesis contains the word."""
    rows = []
    for label_name, words in paper_numbers.ARTIFACTS.items():
        label = label_id(setup, label_name, 'that the run is an SNLI model')
        for word, (paper_conformity, paper_confidence) in words.items():
            row = {'label': label_name, 'artifact': word, 'paper_conformity': paper_conformity,
                   'paper_confidence': paper_confidence}
            for method in ('conformity', 'confidence'):
                ranks = []
                for m in results[method]:
                    hypothesis = [t.lower() for t in m.tokens]
                    if m.prediction == label and word in hypothesis:
                        ranks.append(saliency_scores.importance_ranks(
                            m.scores, most_positive_first=True)[hypothesis.index(word)])
                row[method] = mean_or_none(ranks)
                row['n_' + method] = len(ranks)
            rows.append(row)
    return rows


def conformity_ranks_higher(rows, conformity='conformity', confidence='confidence'):
    """'10 of 15 words (2 ties)': for how many artifact rows the conformity column gives
    a smaller (more important) rank than the confidence column, over rows with both."""
    pairs = [(row[conformity], row[confidence]) for row in rows
             if row[conformity] is not None and row[confidence] is not None]
    higher = sum(a < b for a, b in pairs)
    ties = sum(a == b for a, b in pairs)
    return '{} of {} words{}'.format(higher, len(pairs),
                                     ' ({})'.format(nlp_utils.count(ties, 'tie')) if ties else '')


def snli_artifacts(run):
    """Table 4 on the evaluation split (offline: a model trained on SNLI dev, test split)."""
    setup = run.setup
    artifacts = {w for words in paper_numbers.ARTIFACTS.values() for w in words}
    examples = [ex for ex in setup.splits.test
                if artifacts & {t.lower() for t in ex[0][1]}]
    results = saliency.interpret_all(setup, ARTIFACT_METHODS, examples, run.dknn, run.batchsize)
    rows = artifact_rows(setup, results)
    columns = ['label', 'artifact', 'conformity', 'confidence', 'paper_conformity',
               'paper_confidence', 'n_conformity', 'n_confidence']
    header = ('# SNLI artifacts: average importance rank (1 = most important word)\n\n'
              'Small-data proxy: trained on {} examples of SNLI dev, evaluated on the test '
              'split ({} examples with an artifact word); the paper trained on the full train '
              'split and used the validation set. Conformity ranks the artifact above '
              'confidence for {}; the paper: {}. {}\n'.format(
                  len(setup.splits.train), len(examples), conformity_ranks_higher(rows),
                  conformity_ranks_higher(rows, 'paper_conformity', 'paper_confidence'),
                  provenance(setup, run.produced_by)))
    write_table(run.stem, rows, columns, header)
    print(markdown_table(rows, columns))


# Every analysis by its command name, with what it needs of its run, checked before the
# slow DkNN build: the methods it maps (temperature.json is read first when one needs
# it) and whether it takes only a binary sentiment model (check_binary_sentiment).
ANALYSES = {'table2': (table2, TABLE2_METHODS, False),
            'highlights': (highlights, HIGHLIGHT_METHODS, False),
            'terribly': (terribly, TERRIBLY_METHODS, True),
            'normalizations': (normalizations, HIGHLIGHT_METHODS + TERRIBLY_METHODS, True),
            'snli-artifacts': (snli_artifacts, ARTIFACT_METHODS, False)}
