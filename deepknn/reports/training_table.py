"""The training table: accuracy, speed, memory and weights hash of every training run.

One row per result folder (training_rows), each with the call of the training script
(scripts/train_and_dknn.sh, named by the caller) that makes it again (rerun_command). As
in Table 1, the rows of runs this checkout does not have are kept from the previous
training.csv (carried_rows).
"""
import os

from deepknn.models import model_setup
from deepknn.reports import tables
import nlp_utils
from nlp_utils import UserError

COLUMNS = ['dataset', 'model', 'run', 'dev', 'test', 'epochs', 'seconds_per_epoch',
           'peak_memory_mb', 'model_sha256', 'command']

# train_text_classifier.py's defaults of the settings a run may change (args.json keys).
RERUN_DEFAULTS = (('epoch', 30), ('seed', 777), ('vocab', 'pretrained'), ('layer', 3),
                  ('unit', 300), ('dropout', 0.4), ('batchsize', 64), ('n_calib', 1000),
                  ('dev_fraction', 0.1), ('min_freq', 2), ('max_vocab', None),
                  ('label_noise', 0.0), ('label_noise_seed', 0))

# A transformer's units, layers and dropout are its checkpoint's, not flags.
TRANSFORMER_RERUN_DEFAULTS = (('epoch', 3), ('seed', 777), ('batchsize', 32), ('lr', 3e-5),
                              ('warmup', 0.1), ('max_length', 128), ('n_calib', 1000),
                              ('dev_fraction', 0.1), ('label_noise', 0.0),
                              ('label_noise_seed', 0))


def training_folders(results_dir):
    """The trained result folders under RESULTS_DIR (those with a train_result.json),
    sorted; demo_* folders come from `make demo`, not from train_and_dknn.sh."""
    names = sorted(os.listdir(results_dir)) if os.path.isdir(results_dir) else []
    return [os.path.join(results_dir, name) for name in names if not name.startswith('demo_')
            and os.path.exists(os.path.join(results_dir, name, 'train_result.json'))]


def training_row(folder, rerun_script):
    """Accuracy (%), seconds per epoch, peak memory (MB, None without time.txt), weights
    hash and rerun command (a call of `rerun_script`) of one training run, from its
    result folder."""
    config = model_setup.read_config(os.path.join(folder, 'args.json'))
    result = nlp_utils.read_json(os.path.join(folder, 'train_result.json'), 'training result',
                                 dict)
    log = nlp_utils.read_json(os.path.join(folder, 'log'), 'training log', list)
    if not log or not isinstance(log[-1], dict) or 'elapsed_time' not in log[-1]:
        raise UserError('training log {} has no finished epoch; re-train that run or remove '
                        'it from {}'.format(os.path.join(folder, 'log'), os.path.dirname(folder)))
    peak_kb = peak_memory_kb(os.path.join(folder, 'time.txt'))
    return {'dataset': config.dataset, 'model': config.model, 'run': os.path.basename(folder),
            'dev': round(100 * result['dev_accuracy'], 1),
            'test': round(100 * result['test_accuracy'], 1), 'epochs': config.epoch,
            'seconds_per_epoch': round(log[-1]['elapsed_time'] / log[-1]['epoch'], 1),
            'peak_memory_mb': None if peak_kb is None else round(peak_kb / 1024),
            'model_sha256': model_setup.model_digest(folder, config.model_path),
            'command': rerun_command(folder, config, rerun_script)}


def peak_memory_kb(path):
    """The peak resident memory (KiB) that scripts/train_and_dknn.sh recorded in
    `path` ('peak_rss_kb N wall_s S'), None without that file; UserError naming it
    when it says something else."""
    if not os.path.exists(path):
        return None
    with open(path, errors='replace') as f:
        words = f.read().split()
    value = dict(zip(words[0::2], words[1::2])).get('peak_rss_kb', '')
    if not value.isdigit():
        raise UserError('{} does not hold "peak_rss_kb N" (its training\'s timing); remove it '
                        '(the table then shows no memory) or re-train the run'.format(path))
    return int(value)


def rerun_command(folder, config, rerun_script):
    """The call of `rerun_script` (scripts/train_and_dknn.sh: DATASET MODEL FLAGS, the run
    folder name in $RUN) that makes this result folder again."""
    name, default_name = os.path.basename(folder), '{}_{}'.format(config.dataset,
                                                                 config.model)
    settings = config.to_json()   # folders from before --vocab have vocab 'train'
    defaults = (TRANSFORMER_RERUN_DEFAULTS if model_setup.is_transformer(config)
                else RERUN_DEFAULTS)
    flags = ''.join(' --{} {}'.format(key.replace('_', '-'), settings[key])
                    for key, default in defaults if settings.get(key, default) != default)
    if config.char_based:
        flags += ' --char-based'
    for flag in ('train_file', 'test_file', 'dev_file', 'exclude_train', 'pretrained'):
        if getattr(config, flag):
            flags += ' --{} .../{}'.format(flag.replace('_', '-'),
                                           os.path.basename(getattr(config, flag)))
    prefix = '' if name == default_name else 'RUN={} '.format(name)
    return '{}{} {} {}{}'.format(prefix, rerun_script, config.dataset, config.model, flags)


def run_of_command(command, rerun_script):
    """The run folder name a rerun_command (a call of `rerun_script`) makes: RUN=name,
    else DATASET_MODEL. Reads the rows of training.csv files written before the table
    had a run column."""
    words = command.split()
    if words and words[0].startswith('RUN='):
        return words[0][len('RUN='):]
    try:
        dataset, model = words[words.index(rerun_script) + 1:][:2]
    except ValueError:
        raise UserError('unreadable command {!r}'.format(command)) from None
    return '{}_{}'.format(dataset, model)


def carried_rows(previous_csv, rows, rerun_script):
    """The rows of an earlier training.csv for runs not among ROWS, as written (blank
    cells None); model_sha256 tables.NOT_RECORDED where that table had none; []
    without that file. Rows without a run name take it from their call of
    `rerun_script`."""
    fresh = {row['run'] for row in rows}
    carried = []
    for line, row in tables.previous_rows(previous_csv):
        try:
            run = row.get('run') or run_of_command(row['command'] or '', rerun_script)
            kept = {column: row.get(column) or None for column in COLUMNS}
        except (KeyError, UserError) as error:
            raise UserError('{} line {}: unreadable training row ({}); delete that row or '
                            'the file to rebuild the table from the folders alone'.format(
                                previous_csv, line, error)) from None
        if run not in fresh:
            carried.append(dict(kept, run=run,
                                model_sha256=kept['model_sha256'] or tables.NOT_RECORDED))
    return carried


def training_rows(results_dir, previous_csv, rerun_script):
    """(rows, carried): a row per trained folder under RESULTS_DIR plus the carried
    rows of PREVIOUS_CSV, sorted by run name; carried alone, for the header's note.
    The command column calls `rerun_script` (scripts/train_and_dknn.sh)."""
    rows = [training_row(folder, rerun_script) for folder in training_folders(results_dir)]
    carried = carried_rows(previous_csv, rows, rerun_script)
    return sorted(rows + carried, key=lambda row: row['run']), carried
