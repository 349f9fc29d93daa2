"""results/ holds its index and one folder per study, and the documentation's links resolve.

The committed files under results/ (`git ls-files results`) are results/README.md, the
index, and files directly inside the study folders of `deepknn.cli.STUDIES`; trained run
folders (results/RUN/) are git-ignored and never listed. Every relative link of
README.md, docs/*.md and the pages under results/ (Markdown links and images, and the
href/src of the HTML pages) names a file of the checkout.
"""
import fnmatch
import glob
import os
import posixpath
import re
import subprocess

import pytest

from cli_helpers import parsed_args

from deepknn import cli
import paper_results
import run_knn_representations

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))
INDEX = 'results/README.md'
MARKDOWN_LINK = re.compile(r'\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)')
HTML_LINK = re.compile(r'\b(?:href|src)="([^"]*)"')
URL = re.compile(r'^[A-Za-z][A-Za-z0-9+.-]*:')    # http:, https:, mailto:, data:


def study_folders():
    """The study folders as git names them: results/wallace, ..."""
    return {folder.replace(os.sep, '/') for folder in cli.STUDIES}


def misplaced_results(paths):
    """The paths of `paths` (git's names of committed files under results/) that are
    neither the index nor a file directly inside a study folder."""
    return [path for path in paths
            if path != INDEX and posixpath.dirname(path) not in study_folders()]


def committed_results():
    """`git ls-files results` of this checkout; skips outside a git checkout."""
    try:
        listed = subprocess.run(['git', 'ls-files', '-z', 'results'], cwd=ROOT, check=True,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip('not a git checkout')
    return [path for path in listed.stdout.decode('utf-8').split('\0') if path]


def linked_targets(path):
    """[(line number, target)] of the links of page `path` (.md: Markdown links and
    images; .html: href and src) that point into the checkout: URLs and links to an
    anchor of the same page are left out, an #anchor is dropped from the rest."""
    pattern = HTML_LINK if path.endswith('.html') else MARKDOWN_LINK
    with open(path, encoding='utf-8') as f:
        lines = f.read().split('\n')
    return [(number, target.split('#')[0])
            for number, line in enumerate(lines, 1) for target in pattern.findall(line)
            if not URL.match(target) and not target.startswith('#')]


def broken_links(path):
    """['PATH:LINE: TARGET'] of the links of page `path` whose target, read relative to
    the page's folder, does not exist."""
    folder = os.path.dirname(path)
    return ['{}:{}: {}'.format(os.path.relpath(path, ROOT), number, target)
            for number, target in linked_targets(path)
            if not os.path.exists(os.path.join(folder, target))]


def documentation_pages():
    """README.md, docs/*.md and the .md and .html pages under results/."""
    def found(*pattern):
        return sorted(glob.glob(os.path.join(ROOT, *pattern), recursive=True))
    return ([os.path.join(ROOT, 'README.md')] + found('docs', '*.md')
            + found('results', '**', '*.md') + found('results', '**', '*.html'))


def test_results_holds_only_the_index_and_the_study_folders():
    committed = committed_results()
    assert INDEX in committed
    assert misplaced_results(committed) == []
    assert {posixpath.dirname(path) for path in committed} == study_folders() | {'results'}


def git_ignores(path):
    """Whether this checkout's .gitignore ignores `path` (relative to the root)."""
    checked = subprocess.run(['git', 'check-ignore', '-q', '--no-index', path], cwd=ROOT)
    if checked.returncode not in (0, 1):
        pytest.skip('not a git checkout')
    return checked.returncode == 0


def test_a_new_table_of_a_study_folder_is_not_ignored_but_a_run_folder_is():
    for folder in study_folders():
        assert not git_ignores(folder + '/new_table.md'), folder
    assert git_ignores('results/stsa.binary_cnn/args.json')
    assert git_ignores('results/rajani/weights.npz')
    assert git_ignores('results/feng/reduction_run_dev_gradient.jsonl')   # records, as before
    assert git_ignores('results/feng/.reduction_run_dev.outputs.lock')


def test_a_table_outside_the_study_folders_is_misplaced():
    planted = [INDEX, 'results/wallace/table1.md', 'results/table1.md',
               'results/wallace/old/table1.md', 'results/notes/x.md', 'results/rajani']
    assert misplaced_results(planted) == ['results/table1.md', 'results/wallace/old/table1.md',
                                          'results/notes/x.md', 'results/rajani']


def committed_folders(committed, pattern):
    """The folders of the committed files whose name matches glob `pattern`."""
    return {posixpath.dirname(path) for path in committed
            if fnmatch.fnmatch(posixpath.basename(path), pattern)}


def test_paper_results_writes_each_table_where_the_committed_one_lies():
    committed = committed_results()
    for command, (name, suffixes) in paper_results.OUTPUTS.items():
        for suffix in suffixes:
            pattern = name.format(run='*', split='*') + suffix
            assert committed_folders(committed, pattern) == {
                paper_results.STUDY_FOLDERS[command].replace(os.sep, '/')}, (command, pattern)


@pytest.mark.parametrize('argv, prefix', [
    (['backoff', '--model-setup', 'RUN/args.json'], 'knn_backoff'),
    (['detect', '--model-setup', 'RUN/args.json'], 'knn_mislabeled'),
    (['contrast', '--model-setup', 'A/args.json', 'B/args.json'], 'knn_contrast'),
    (['candidates', '--model-setup', 'RUN/args.json'], 'knn_candidates'),
    (['negation'], 'knn_negation')])
def test_rajani_tables_go_where_the_committed_ones_lie(argv, prefix, any_run_path):
    args = run_knn_representations.parse_args(argv)
    stem = run_knn_representations.output_stem(args).replace(os.sep, '/')
    assert stem == 'results/rajani/' + prefix
    assert committed_folders(committed_results(), prefix + '*') == {'results/rajani'}


@pytest.mark.parametrize('script, argv, prefix', [
    ('scripts/knn_robustness.py', ['--model-setup', 'RUN', '--dataset', 'anli'], 'knn_robustness'),
    ('reduce_inputs.py', ['--model-setup', 'RUN/args.json'], 'reduction_')])
def test_script_tables_go_where_the_committed_ones_lie(script, argv, prefix, any_run_path,
                                                       monkeypatch):
    module, args = parsed_args(script, argv, monkeypatch)
    stem = (module.output_stem(args, 'run') if script == 'reduce_inputs.py'
            else module.output_stem(args))
    folder = os.path.dirname(stem).replace(os.sep, '/')
    assert committed_folders(committed_results(), prefix + '*') == {folder}


def test_the_index_links_every_study_folder():
    targets = {target for _, target in linked_targets(os.path.join(ROOT, INDEX))}
    for folder in study_folders():
        study = folder.split('/', 1)[1]
        assert any(target.startswith(study + '/') for target in targets), \
            '{} links no file of {}/'.format(INDEX, folder)


def test_every_relative_link_of_the_documentation_resolves():
    pages = documentation_pages()
    assert os.path.join(ROOT, INDEX) in pages and len(pages) > 100
    broken = [link for page in pages for link in broken_links(page)]
    assert broken == [], 'links to no file:\n' + '\n'.join(broken)


def test_a_planted_broken_link_is_found(tmp_path):
    (tmp_path / 'study').mkdir()
    (tmp_path / 'study' / 'table.md').write_text('| a |\n')
    (tmp_path / 'figure.png').write_bytes(b'png')
    page = tmp_path / 'README.md'
    page.write_text('# Index\n\n[table](study/table.md), ![figure](figure.png "title")\n'
                    '[section](#index), [paper](https://example.org/x.md), '
                    '[anchored](study/table.md#rows)\n'
                    '[moved](table.md) and ![gone](study/figure.png)\n')
    assert [link.rsplit(': ', 1)[1] for link in broken_links(str(page))] == [
        'table.md', 'study/figure.png']
    assert [number for number, _ in linked_targets(str(page))] == [3, 3, 4, 5, 5]


def test_a_broken_link_of_an_html_page_is_found(tmp_path):
    (tmp_path / 'a.png').write_bytes(b'png')
    page = tmp_path / 'page.html'
    page.write_text('<img src="a.png"><a href="https://example.org">x</a>\n'
                    '<img src="b.png"><img src="data:image/png;base64,AAAA">')
    assert [link.rsplit(': ', 1)[1] for link in broken_links(str(page))] == ['b.png']
