"""The repository's layout (docs/architecture.md): every import points down the layers.

The import graph is read with `ast` from every .py file of the root, `deepknn/` (all
depths), `scripts/` and `benchmarks/`, imports inside functions included, and checked by
`layout_violations`, which fails on
  (a) a module under deepknn/ importing a root script,
  (b) an import against the layer table (and deepknn.cli used by anything but a
      command line, or importing above layer 1),
  (c) an import cycle among project modules,
  (d) a module under deepknn/ that the table does not place,
  (e) more than MAX_ROOT_FILES .py files at the root.
The checker is a function of a graph, so each rule is also tested on a made-up graph.
`message_violations` checks that the library names parameters, not a command's flags
or scripts (rules (f)-(h) below), and is tested on a made-up tree.
The layer table is docs/architecture.md's, its one copy, which must list every file of
the project with its job (the first line of its docstring), and nothing else.
"""
import ast
import dataclasses
import importlib.metadata
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))

# The Chainer example's building blocks: kept at the root, but library modules (layers
# 0-1). Every other .py file at the root is a command line (a root script, layer 5).
BUILDING_BLOCKS = ('nets', 'text_datasets', 'nlp_utils')
MAX_ROOT_FILES = 13
# "A module that passes about 400 lines ... is split along the job boundary."
MAX_MODULE_LINES = 420

# The layer table of docs/architecture.md, its one copy: rows `| layer | `file` | job |`.
ARCHITECTURE_PAGE = os.path.join(ROOT, 'docs', 'architecture.md')
_ROW = re.compile(r'^\| (0|1|2|3[abcd]|4e?|5|cli) \| `([^`]+)` \| (.*) \|$')


def read_layer_table(path=ARCHITECTURE_PAGE):
    """{file path: (layer, job)} of the page's layer table."""
    with open(path, encoding='utf-8') as f:
        rows = [_ROW.match(line) for line in f.read().splitlines()]
    return {m.group(2): (m.group(1), m.group(3).replace('\\|', '|')) for m in rows if m}


def layers_of(rows):
    """Module -> layer of the table's library rows (the command lines' layer 5 is
    known from where a file lies). A module may import only lower layers; within layers
    1 and 3 also modules of an earlier or the same sub-layer (3a < 3b < 3c < 3d), cycles
    excluded by rule (c)."""
    return {module_name(path): layer for path, (layer, _) in rows.items()
            if layer != '5' and path.endswith('.py')}


# Layers whose modules may import each other without a cycle (layer 3 in sub-layer order):
# result_folder raises nlp_utils.UserError (the one error type); reports share plots,
# tables and the published numbers.
SAME_LAYER_OK = ('0', '1', '3', '4')
COMMAND_LINE = '5'
CLI = 'cli'
CLI_MAY_IMPORT = ('0', '1')


@dataclasses.dataclass(frozen=True)
class Import:
    path: str       # the importing file, relative to the repository root
    line: int
    importer: str   # its module name
    imported: str   # the project module it imports


@dataclasses.dataclass
class Graph:
    modules: dict   # module name -> file path relative to the root
    imports: list   # Import, project modules only


# ---------------------------------------------------------------- reading the graph
def project_files(root):
    """.py files (relative paths) of the root, deepknn/ (all depths), scripts/, benchmarks/."""
    paths = [name for name in os.listdir(root) if name.endswith('.py')]
    for folder, recursive in (('deepknn', True), ('scripts', False), ('benchmarks', False)):
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, folder)):
            dirnames[:] = sorted(d for d in dirnames if d != '__pycache__') if recursive else []
            paths += [os.path.relpath(os.path.join(dirpath, f), root)
                      for f in filenames if f.endswith('.py')]
    return sorted(p.replace(os.sep, '/') for p in paths)


def module_name(path):
    """'deepknn/feng/measures.py' -> 'deepknn.feng.measures'; a package's __init__.py
    -> the package; 'benchmarks/bench_lstm.py' -> 'benchmarks.bench_lstm'."""
    parts = path[:-len('.py')].split('/')
    if parts[-1] == '__init__':
        parts = parts[:-1]
    return '.'.join(parts)


def _resolve(name, modules):
    """The project module that importing dotted `name` loads: the longest prefix of it
    that is a project module, or None for a module from outside the project."""
    parts = name.split('.')
    for n in range(len(parts), 0, -1):
        candidate = '.'.join(parts[:n])
        if candidate in modules:
            return candidate
    return None


def _imported_names(node, importer, is_package):
    """Dotted names an Import / ImportFrom node loads (`from pkg import name` loads the
    submodule pkg.name when there is one, else pkg: `_resolve` finds which)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ''
    if node.level:   # relative: from the importer's package, `level - 1` packages up
        package = importer.split('.') if is_package else importer.split('.')[:-1]
        package = package[:len(package) - (node.level - 1)]
        base = '.'.join(package + ([base] if base else []))
    return [base + '.' + alias.name if base else alias.name for alias in node.names]


def read_graph(root=ROOT):
    """The import graph of the project's .py files under `root`."""
    modules = {module_name(path): path for path in project_files(root)}
    imports = []
    for importer, path in sorted(modules.items()):
        with open(os.path.join(root, path), encoding='utf-8') as f:
            tree = ast.parse(f.read(), filename=path)
        is_package = path.endswith('__init__.py')
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            targets = {_resolve(name, modules)
                       for name in _imported_names(node, importer, is_package)}
            targets.discard(None)
            imports += [Import(path, node.lineno, importer, target)
                        for target in sorted(targets)]
    return Graph(modules, sorted(imports, key=lambda i: (i.path, i.line, i.imported)))


# ---------------------------------------------------------------- checking it
def is_root_script(module, path):
    return '/' not in path and module not in BUILDING_BLOCKS


def layer_of(module, path, table):
    """The module's layer: its `table` entry, '5' for a command line, None if unplaced."""
    if module in table:
        return table[module]
    for key, layer in table.items():
        if key.endswith('.*') and module.startswith(key[:-1]):
            return layer
    if is_root_script(module, path) or path.startswith(('scripts/', 'benchmarks/')):
        return COMMAND_LINE
    return None


def describe(layer):
    return 'deepknn.cli' if layer == CLI else 'layer ' + layer


def layer_rule(importer_layer, imported_layer):
    """None if a module of `importer_layer` may import one of `imported_layer`, else
    the rule it breaks."""
    if imported_layer == CLI:
        if importer_layer not in (COMMAND_LINE, CLI):   # cli.py re-exports cli/plumbing.py
            return ('deepknn.cli (the command lines\' shared flags) may be imported only by '
                    'layer 5 (root scripts, scripts/, benchmarks/), not by {}'
                    .format(describe(importer_layer)))
        return None
    if importer_layer == CLI:
        if imported_layer not in CLI_MAY_IMPORT:
            return ('deepknn.cli may import only layers {}, not layer {}'
                    .format(' and '.join(CLI_MAY_IMPORT), imported_layer))
        return None
    within = imported_layer[0] == importer_layer[0] and importer_layer[0] in SAME_LAYER_OK
    if int(imported_layer[0]) < int(importer_layer[0]) or (
            within and imported_layer <= importer_layer):   # '3a' <= '3b', '1' <= '1'
        return None
    if within:
        return ('imports point down: {} may import only lower layers and earlier or the '
                'same sub-layer, not {}'.format(describe(importer_layer),
                                                 describe(imported_layer)))
    if importer_layer == '0':
        return ('layer 0 is the ground: it imports only numpy, chainer, the standard library '
                'and layer 0, not {}'.format(describe(imported_layer)))
    return ('imports point down: {} may import only lower layers, not {}'
            .format(describe(importer_layer), describe(imported_layer)))


def _cycles(graph):
    """One cycle (a list of Import, each importing the next one's importer) per strongly
    connected component of the graph that has one."""
    edges = {}
    for imp in graph.imports:
        edges.setdefault(imp.importer, {}).setdefault(imp.imported, imp)
    index, low, stack, on_stack, components = {}, {}, [], set(), []

    def connect(v):   # Tarjan; the graph has a few dozen nodes, recursion is fine
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            components.append(set(component))

    for v in sorted(set(edges) | {i.imported for i in graph.imports}):
        if v not in index:
            connect(v)
    cycles = []
    for component in components:
        start = min(component)
        if len(component) == 1 and start not in edges.get(start, {}):
            continue
        # shortest path start -> ... -> start inside the component (breadth first)
        previous, frontier, found = {}, [start], None
        while frontier and found is None:
            next_frontier = []
            for v in frontier:
                for w in sorted(edges.get(v, ())):
                    if w not in component:
                        continue
                    if w == start:
                        found = v
                        break
                    if w not in previous:
                        previous[w] = v
                        next_frontier.append(w)
                if found is not None:
                    break
            frontier = next_frontier
        path, v = [edges[found][start]], found
        while v != start:
            path.append(edges[previous[v]][v])
            v = previous[v]
        cycles.append(path[::-1])
    return cycles


def layout_violations(graph, table=None, max_root_files=MAX_ROOT_FILES):
    """Every breach of the layout in `graph` (layers: `table`, module -> layer, by
    default docs/architecture.md's), one readable line each."""
    table = layers_of(read_layer_table()) if table is None else table
    problems = []
    root_files = sorted(path for path in graph.modules.values() if '/' not in path)
    if len(root_files) > max_root_files:
        problems.append('(e) {} .py files at the root, at most {}: the root holds what users '
                        'run plus the Chainer example\'s building blocks ({})'
                        .format(len(root_files), max_root_files, ', '.join(root_files)))
    for module, path in sorted(graph.modules.items()):
        if path.startswith('deepknn/') and layer_of(module, path, table) is None:
            problems.append('(d) {} ({}) has no layer: give the new module its row in the '
                            'layer table of docs/architecture.md'.format(path, module))
    for imp in graph.imports:
        imported_path = graph.modules[imp.imported]
        where = '{}:{} imports {}'.format(imp.path, imp.line, imp.imported)
        if imp.path.startswith('deepknn/') and is_root_script(imp.imported, imported_path):
            problems.append('(a) {}: nothing under deepknn/ imports a root script (the '
                            'command lines import the library, never the reverse)'
                            .format(where))
            continue
        importer_layer = layer_of(imp.importer, imp.path, table)
        imported_layer = layer_of(imp.imported, imported_path, table)
        if importer_layer is None or imported_layer is None:
            continue   # reported by (d)
        rule = layer_rule(importer_layer, imported_layer)
        if rule:
            problems.append('(b) {}: {}'.format(where, rule))
    for cycle in _cycles(graph):
        problems.append('(c) import cycle {} -> {}: {}; imports point one way, so one of '
                        'them must go'.format(
                            ' -> '.join(imp.importer for imp in cycle), cycle[0].importer,
                            '; '.join('{}:{} imports {}'.format(imp.path, imp.line,
                                                                imp.imported)
                                      for imp in cycle)))
    return problems


# ---------------------------------------------------------------- the real tree
def test_the_import_graph_follows_the_layers():
    problems = layout_violations(read_graph(ROOT))
    assert not problems, 'layout violations (docs/architecture.md):\n' + '\n'.join(problems)


def first_docstring_line(path):
    """A file's job: the first line of its docstring (of its opening comment for a shell
    script)."""
    with open(os.path.join(ROOT, path), encoding='utf-8') as f:
        text = f.read()
    if path.endswith('.sh'):
        return text.splitlines()[1].lstrip('# ').rstrip()
    return (ast.get_docstring(ast.parse(text)) or '').split('\n')[0].strip()


def test_the_layer_table_lists_every_file_with_its_job():
    rows = read_layer_table()
    files = set(read_graph(ROOT).modules.values()) | {
        os.path.join('scripts', name) for name in os.listdir(os.path.join(ROOT, 'scripts'))
        if name.endswith('.sh')}
    missing = sorted(files - set(rows))
    assert not missing, 'docs/architecture.md lacks rows for {}'.format(missing)
    assert not sorted(set(rows) - files), 'docs/architecture.md lists files that do not exist'
    stale = ['| {} | `{}` | {} |'.format(layer, path, first_docstring_line(path))
             for path, (layer, job) in sorted(rows.items()) if job != first_docstring_line(path)]
    assert not stale, 'docs/architecture.md rows whose job is not the docstring\'s first ' \
        'line; they should read:\n' + '\n'.join(stale)
    assert all(layer == '5' for path, (layer, _) in rows.items() if
               path.startswith(('scripts/', 'benchmarks/')) or layer_of(
                   module_name(path), path, {}) == COMMAND_LINE and path.endswith('.py'))


# The folder table of docs/architecture.md ("Where is X?"): `| `deepknn/x/` | holds |`.
_FOLDER_ROW = re.compile(r'^\| `(deepknn/\w+/)` \| (.*) \|$')
# The only modules directly in deepknn/: the package and the one registry mechanism.
TOP_LEVEL_MODULES = {'__init__.py', 'registry.py'}


def read_folder_table(path=ARCHITECTURE_PAGE):
    """{folder: what it holds} of the page's folder table."""
    with open(path, encoding='utf-8') as f:
        rows = [_FOLDER_ROW.match(line) for line in f.read().splitlines()]
    return {m.group(1): m.group(2) for m in rows if m}


def folder_violations(root=ROOT, table=None):
    """Every deepknn/ folder listed, described by its __init__.py's first docstring line,
    and no module directly in deepknn/ but TOP_LEVEL_MODULES."""
    table = read_folder_table() if table is None else table
    library = os.path.join(root, 'deepknn')
    folders = {'deepknn/{}/'.format(name) for name in os.listdir(library)
               if os.path.isdir(os.path.join(library, name)) and name != '__pycache__'}
    problems = ['{} is not in the folder table'.format(f) for f in sorted(folders - set(table))]
    problems += ['{} is listed but does not exist'.format(f) for f in sorted(set(table) - folders)]
    for folder in sorted(folders & set(table)):
        init = os.path.join(root, folder, '__init__.py')
        with open(init, encoding='utf-8') as source:
            job = (ast.get_docstring(ast.parse(source.read())) or '').split('\n')[0].strip()
        if job != table[folder]:
            problems.append('{}__init__.py says {!r}, the table {!r}'.format(
                folder, job, table[folder]))
    problems += ['deepknn/{} belongs in a folder'.format(name) for name in sorted(
        os.listdir(library)) if name.endswith('.py') and name not in TOP_LEVEL_MODULES]
    return problems


def test_every_folder_has_one_row_and_no_module_lies_loose():
    problems = folder_violations()
    assert not problems, 'docs/architecture.md, "Where is X?":\n' + '\n'.join(problems)


def test_the_folder_rule_fails_on_a_planted_violation(tmp_path):
    (tmp_path / 'deepknn' / 'data').mkdir(parents=True)
    (tmp_path / 'deepknn' / 'data' / '__init__.py').write_text('"""Old words."""\n')
    (tmp_path / 'deepknn' / 'extra').mkdir()
    (tmp_path / 'deepknn' / 'extra' / '__init__.py').write_text('"""X."""\n')
    (tmp_path / 'deepknn' / 'loose.py').write_text('"""Loose."""\n')
    table = {'deepknn/data/': 'The data.', 'deepknn/gone/': 'Gone.'}
    assert folder_violations(str(tmp_path), table) == [
        'deepknn/extra/ is not in the folder table',
        'deepknn/gone/ is listed but does not exist',
        "deepknn/data/__init__.py says 'Old words.', the table 'The data.'",
        'deepknn/loose.py belongs in a folder']


def measure_violations(root=ROOT):
    """Every public function and class of deepknn/evaluation/ (the measures and
    statistics every study shares) defined nowhere else under deepknn/, by name."""
    definitions = {}
    for folder, _, names in os.walk(os.path.join(root, 'deepknn')):
        for name in sorted(n for n in names if n.endswith('.py')):
            path = os.path.relpath(os.path.join(folder, name), root)
            with open(os.path.join(root, path), encoding='utf-8') as source:
                for node in ast.parse(source.read()).body:
                    if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                        definitions.setdefault(node.name, []).append(path)
    shared = sorted(name for name, paths in definitions.items() if not name.startswith('_')
                    and any(p.startswith(os.path.join('deepknn', 'evaluation')) for p in paths))
    return ['{} is defined in {}'.format(name, ', '.join(sorted(definitions[name])))
            for name in shared if len(definitions[name]) > 1]


def test_every_shared_measure_is_defined_once():
    problems = measure_violations()
    assert not problems, 'a measure of deepknn/evaluation/ defined again:\n' + '\n'.join(problems)


def test_the_measure_rule_fails_on_a_planted_copy(tmp_path):
    (tmp_path / 'deepknn' / 'evaluation').mkdir(parents=True)
    (tmp_path / 'deepknn' / 'evaluation' / 'ranking.py').write_text(
        'def auroc(s, p):\n    pass\ndef _helper():\n    pass\n')
    (tmp_path / 'deepknn' / 'study.py').write_text(
        'def auroc(s, p):\n    pass\ndef _helper():\n    pass\n')
    assert measure_violations(str(tmp_path)) == [
        'auroc is defined in deepknn/evaluation/ranking.py, deepknn/study.py']


def test_no_library_module_passes_about_400_lines():
    long = []
    for folder, _, names in os.walk(os.path.join(ROOT, 'deepknn')):
        for name in names:
            if name.endswith('.py'):
                path = os.path.join(folder, name)
                with open(path, encoding='utf-8') as f:
                    n_lines = sum(1 for _ in f)
                if n_lines > MAX_MODULE_LINES:
                    long.append('{} ({} lines)'.format(os.path.relpath(path, ROOT), n_lines))
    assert not long, 'split along the job boundary: ' + ', '.join(long)


# ---------------------------------------------------------------- library messages
# The library names parameters, never a command's flags or scripts (deepknn/cli/__init__.py turns
# a parameter named in backticks into its flag, and `scaling` into its command line):
#   (f) no function under deepknn/ takes a parameter named `args` (parsed flags);
#   (g) no string in a `raise` or a UserError(...) under deepknn/ names a --flag;
#   (h) no string under deepknn/ (docstrings aside; comments are not strings) names a
#       command: a root script, a file of scripts/, or `make TARGET` of the Makefile.
# deepknn/cli/__init__.py and deepknn/cli/plumbing.py, the command lines' own modules (they turn
# parsed flags into typed settings and parameters back into flags), are exempt.
COMMAND_PLUMBING = {'deepknn/cli/__init__.py', 'deepknn/cli/plumbing.py'}
FLAG = re.compile(r'(?<![\w-])--[A-Za-z]')
# Another program's command line in backticks (`ray start --head`) names its flags, not ours.
OTHER_PROGRAM = re.compile(r'`ray [^`]*`')


def command_pattern(root):
    """A regex finding a command's name: the root's scripts (not the building blocks),
    the files of scripts/ (alone or as scripts/NAME) and `make TARGET`."""
    names = [name for name in os.listdir(root)
             if name.endswith('.py') and name[:-len('.py')] not in BUILDING_BLOCKS]
    scripts = os.path.join(root, 'scripts')
    names += [name for name in os.listdir(scripts) if name.endswith(('.py', '.sh'))] \
        if os.path.isdir(scripts) else []
    with open(os.path.join(root, 'Makefile'), encoding='utf-8') as makefile:
        targets = re.findall(r'^([A-Za-z][\w-]*):(?!=)', makefile.read(), re.MULTILINE)
    return re.compile(r'(?<![\w.-])(?:scripts/)?({})(?![\w-])|\bmake ({})(?![\w-])'.format(
        '|'.join(map(re.escape, sorted(names))), '|'.join(map(re.escape, sorted(targets)))))


def _strings(node, skip=()):
    """(line, text) of every string constant under `node`, f-string parts included."""
    return [(c.lineno, c.value) for c in ast.walk(node) if isinstance(c, ast.Constant)
            and isinstance(c.value, str) and id(c) not in skip]


def _docstrings(tree):
    """ids of the docstring constants of a module, its classes and functions."""
    owners = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, owners) and node.body and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)}


def _messages(tree):
    """The raise statements and UserError(...) calls of a module."""
    return [node for node in ast.walk(tree) if isinstance(node, ast.Raise) or (
        isinstance(node, ast.Call) and getattr(node.func, 'id', getattr(node.func, 'attr', ''))
        == 'UserError')]


def message_violations(root=ROOT):
    """'path:line: problem' for every break of rules (f)-(h) under root/deepknn/."""
    commands, found = command_pattern(root), set()
    for path in project_files(root):
        if not path.startswith('deepknn/'):
            continue
        if path in COMMAND_PLUMBING:
            continue
        with open(os.path.join(root, path), encoding='utf-8') as source:
            tree = ast.parse(source.read())
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and any(
                    p.arg == 'args' for p in node.args.posonlyargs + node.args.args
                    + node.args.kwonlyargs):
                found.add((path, node.lineno, 'takes `args`: pass typed values'))
        for line, text in {s for node in _messages(tree) for s in _strings(node)}:
            if FLAG.search(OTHER_PROGRAM.sub('', text)):
                found.add((path, line, 'message names a flag: name the parameter, '
                                       'in backticks'))
        for line, text in _strings(tree, _docstrings(tree)):
            if commands.search(text):
                found.add((path, line, 'names the command {!r}: let the caller name '
                                       'it'.format(commands.search(text).group(0))))
    return ['{}:{}: {}'.format(*problem) for problem in sorted(found)]


def test_the_library_names_parameters_not_flags_or_commands():
    problems = message_violations()
    assert not problems, 'library messages (docs/architecture.md):\n' + '\n'.join(problems)


def test_each_message_rule_fails_on_a_planted_violation(tmp_path):
    (tmp_path / 'Makefile').write_text('.PHONY: demo\ndemo: venv\n\tpython run_x.py\nX := 1\n')
    for name in ('run_x.py', 'nlp_utils.py'):
        (tmp_path / name).write_text('')
    (tmp_path / 'scripts').mkdir()
    (tmp_path / 'scripts' / 'train.sh').write_text('')
    (tmp_path / 'deepknn').mkdir()
    (tmp_path / 'deepknn' / '__init__.py').write_text('"""Made by run_x.py (make demo)."""\n')
    (tmp_path / 'deepknn' / 'cli').mkdir()
    (tmp_path / 'deepknn' / 'cli' / '__init__.py').write_text(
        "def settings(args):\n    raise UserError('--k needs python run_x.py')\n")
    (tmp_path / 'deepknn' / 'bad.py').write_text(
        'def report(setup, args):\n'                                    # line 1: (f)
        "    raise UserError('pass --k 5')\n"                           # 2: (g)
        'def ok(*args, **kwargs):\n'                                    # varargs are fine
        "    # run_x.py --k: a comment\n"
        "    raise UserError('choose a smaller `k`; see nlp_utils.py, make it -- or not')\n"
        "    raise UserError('start one with `ray start --head`')\n"   # another program's flag
        "def hint():\n"
        "    return 'run run_x.py, then scripts/train.sh; --k is no message here'\n"  # 8: (h)
        "def step(x):\n"
        "    raise KeyError(f'{x}: make demo first')\n"                 # 10: (h)
        "check = lambda args: UserError('train.sh --force')\n")         # 11: (f), (g), (h)
    assert message_violations(str(tmp_path)) == [
        'deepknn/bad.py:1: takes `args`: pass typed values',
        'deepknn/bad.py:2: message names a flag: name the parameter, in backticks',
        "deepknn/bad.py:8: names the command 'run_x.py': let the caller name it",
        "deepknn/bad.py:10: names the command 'make demo': let the caller name it",
        'deepknn/bad.py:11: message names a flag: name the parameter, in backticks',
        "deepknn/bad.py:11: names the command 'train.sh': let the caller name it",
        'deepknn/bad.py:11: takes `args`: pass typed values']


def test_the_reader_sees_the_project_and_its_imports():
    graph = read_graph(ROOT)
    assert {'nets', 'nlp_utils', 'text_datasets', 'deepknn', 'deepknn.neighbors.dknn',
            'deepknn.cli', 'deepknn.rajani.knn_influence'} <= set(graph.modules)
    imported = {(i.importer, i.imported) for i in graph.imports}
    assert ('nets', 'deepknn.models.ragged_lstm') in imported
    assert ('deepknn.neighbors.dknn', 'deepknn.neighbors.knn_index') in imported
    assert not any(i.imported in ('numpy', 'chainer', 'os') for i in graph.imports)


def test_the_reader_resolves_every_import_form(tmp_path):
    files = {
        'deepknn/__init__.py': '',
        'deepknn/a.py': 'import os\nimport nlp_utils\n',
        'deepknn/b.py': ('from deepknn import a, sub\n'
                         'from . import c\n'
                         'from .a import thing\n'
                         'def late():\n    import deepknn.sub.d as d\n'
                         'from nlp_utils import UserError\n'),
        'deepknn/c.py': 'from deepknn import missing\n',
        'deepknn/sub/__init__.py': 'from .. import a\n',
        'deepknn/sub/d.py': 'from ..sub import e\nimport numpy.linalg\n',
        'deepknn/sub/e.py': '',
        'nlp_utils.py': '',
        'script.py': 'import deepknn.b\n',
        'benchmarks/bench.py': 'from deepknn.sub.d import something\n',
        'tests/test_x.py': 'import deepknn.a\n',   # tests are not part of the graph
    }
    for path, text in files.items():
        os.makedirs(os.path.dirname(str(tmp_path / path)), exist_ok=True)
        (tmp_path / path).write_text(text)
    graph = read_graph(str(tmp_path))
    assert set(graph.modules) == {'deepknn', 'deepknn.a', 'deepknn.b', 'deepknn.c',
                                  'deepknn.sub', 'deepknn.sub.d', 'deepknn.sub.e',
                                  'nlp_utils', 'script', 'benchmarks.bench'}
    assert {(i.importer, i.line, i.imported) for i in graph.imports} == {
        ('deepknn.a', 2, 'nlp_utils'),
        ('deepknn.b', 1, 'deepknn.a'), ('deepknn.b', 1, 'deepknn.sub'),
        ('deepknn.b', 2, 'deepknn.c'),
        ('deepknn.b', 3, 'deepknn.a'), ('deepknn.b', 5, 'deepknn.sub.d'),
        ('deepknn.b', 6, 'nlp_utils'),
        ('deepknn.c', 1, 'deepknn'),   # no such submodule: the package is what loads
        ('deepknn.sub', 1, 'deepknn.a'), ('deepknn.sub.d', 1, 'deepknn.sub.e'),
        ('script', 1, 'deepknn.b'), ('benchmarks.bench', 1, 'deepknn.sub.d')}


# ---------------------------------------------------------------- the checker can fail
FAKE_TABLE = {'nlp_utils': '0', 'deepknn': '0', 'deepknn.storage.result_folder': '0',
              'nets': '1', 'deepknn.data.splits': '1', 'deepknn.models.model_setup': '2',
              'deepknn.evaluation.calibration': '3a',
    'deepknn.interpret.leave_one_out': '3a', 'deepknn.neighbors.dknn': '3a', 'deepknn.interpret.saliency': '3b',
              'deepknn.reports.*': '4', 'deepknn.cli': 'cli'}
FAKE_MODULES = {'nlp_utils': 'nlp_utils.py', 'nets': 'nets.py', 'run_dknn': 'run_dknn.py',
                'train': 'train.py', 'deepknn': 'deepknn/__init__.py',
                'deepknn.storage.result_folder': 'deepknn/storage/result_folder.py',
                'deepknn.data.splits': 'deepknn/data/splits.py',
                'deepknn.models.model_setup': 'deepknn/models/model_setup.py',
                'deepknn.evaluation.calibration': 'deepknn/evaluation/calibration.py',
                'deepknn.neighbors.dknn': 'deepknn/neighbors/dknn.py', 'deepknn.interpret.saliency': 'deepknn/interpret/saliency.py',
                'deepknn.reports.plots': 'deepknn/reports/plots.py',
                'deepknn.cli': 'deepknn/cli/__init__.py', 'benchmarks.bench': 'benchmarks/bench.py'}
# Imports the layers allow: down, within layers 0, 1, 3 (sub-layer order) and 4, the CLI
# from command lines. Line numbers are 10, 11, ...; an added import gets line 22.
FAKE_CLEAN = [('run_dknn', 'deepknn.cli'), ('run_dknn', 'deepknn.reports.plots'),
              ('benchmarks.bench', 'deepknn.cli'), ('deepknn.cli', 'deepknn.data.splits'),
              ('deepknn.cli', 'nlp_utils'), ('deepknn.reports.plots', 'deepknn.interpret.saliency'),
              ('deepknn.interpret.saliency', 'deepknn.neighbors.dknn'), ('deepknn.neighbors.dknn', 'deepknn.models.model_setup'),
              ('deepknn.models.model_setup', 'nets'), ('nets', 'deepknn.data.splits'),
              ('deepknn.data.splits', 'nlp_utils'), ('run_dknn', 'deepknn.models.model_setup')]


def fake_graph(extra_imports=(), extra_modules=None, root_files=0):
    modules = dict(FAKE_MODULES, **(extra_modules or {}))
    modules.update({'tool{}'.format(i): 'tool{}.py'.format(i) for i in range(root_files)})
    imports = [Import(modules[a], 10 + n, a, b)
               for n, (a, b) in enumerate(FAKE_CLEAN + list(extra_imports))]
    return Graph(modules, imports)


def test_a_clean_fake_graph_passes():
    assert layout_violations(fake_graph(), FAKE_TABLE) == []


@pytest.mark.parametrize('graph, expected', [
    # (a) the library imports a root script
    (fake_graph([('deepknn.neighbors.dknn', 'train')]),
     ['(a) deepknn/neighbors/dknn.py:22 imports train: nothing under deepknn/ imports a root script']),
    (fake_graph([('deepknn.reports.plots', 'train')]),
     ['(a) deepknn/reports/plots.py:22 imports train']),
    # (b) upward: across layers, across sub-layers of 3, from layer 0
    (fake_graph([('deepknn.models.model_setup', 'deepknn.evaluation.calibration')]),
     ['(b) deepknn/models/model_setup.py:22 imports deepknn.evaluation.calibration', 'layer 2 may import '
      'only lower layers, not layer 3a']),
    (fake_graph([('deepknn.evaluation.calibration', 'deepknn.interpret.saliency')]),
     ['(b) deepknn/evaluation/calibration.py:22 imports deepknn.interpret.saliency', 'layer 3a may import only '
      'lower layers and earlier or the same sub-layer, not layer 3b']),
    (fake_graph([('deepknn.storage.result_folder', 'deepknn.data.splits')]),
     ['(b) deepknn/storage/result_folder.py:22 imports deepknn.data.splits', 'layer 0 is the ground',
      'not layer 1']),
    (fake_graph([('nets', 'train')]),
     ['(b) nets.py:22 imports train', 'layer 1 may import only lower layers, not layer 5']),
    # (b) deepknn.cli: only command lines import it, and it imports only layers 0-1
    (fake_graph([('deepknn.reports.plots', 'deepknn.cli')]),
     ['(b) deepknn/reports/plots.py:22 imports deepknn.cli',
      'may be imported only by layer 5', 'not by layer 4']),
    (fake_graph([('deepknn.cli', 'deepknn.models.model_setup')]),
     ['(b) deepknn/cli/__init__.py:22 imports deepknn.models.model_setup',
      'deepknn.cli may import only layers 0 and 1, not layer 2']),
    # (c) a cycle, here inside layer 1 where same-layer imports are allowed
    (fake_graph([('deepknn.data.splits', 'nets')]),
     ['(c) import cycle deepknn.data.splits -> nets -> deepknn.data.splits: deepknn/data/splits.py:22 '
      'imports nets; nets.py:19 imports deepknn.data.splits']),
    (fake_graph([('deepknn.neighbors.dknn', 'deepknn.neighbors.dknn')]),
     ['(c) import cycle deepknn.neighbors.dknn -> deepknn.neighbors.dknn: deepknn/neighbors/dknn.py:22 imports '
      'deepknn.neighbors.dknn']),
    # (d) a new library module nobody placed
    (fake_graph(extra_modules={'deepknn.new_method': 'deepknn/new_method.py'}),
     ['(d) deepknn/new_method.py (deepknn.new_method) has no layer']),
    # (e) too many files at the root (nlp_utils, nets, run_dknn, train and ten tools)
    (fake_graph(root_files=10), ['(e) 14 .py files at the root, at most 13']),
], ids=['a-library-imports-script', 'a-report-imports-script', 'b-up-a-layer',
        'b-up-a-sub-layer', 'b-ground-imports-up', 'b-building-block-imports-script',
        'b-cli-imported-by-report', 'b-cli-imports-loader', 'c-cycle', 'c-self-import',
        'd-unplaced-module', 'e-crowded-root'])
def test_each_kind_of_violation_is_reported(graph, expected):
    problems = layout_violations(graph, FAKE_TABLE)
    assert len(problems) == 1, problems
    for fragment in expected:
        assert fragment in problems[0], (fragment, problems[0])


def test_thirteen_root_files_are_allowed():
    assert layout_violations(fake_graph(root_files=9), FAKE_TABLE) == []


# ---------------------------------------------------------------- the installed package
def test_installed_package_imports_from_any_directory(tmp_path):
    """`pip install -e . --no-deps --no-build-isolation` (pyproject.toml) makes the
    library and the building blocks importable outside the checkout."""
    try:
        importlib.metadata.distribution('deep-knn')
    except importlib.metadata.PackageNotFoundError:
        pytest.skip('deep-knn is not installed in {} (run `pip install -e . --no-deps '
                    '--no-build-isolation` in the venv, as `make venv` does)'
                    .format(sys.executable))
    env = {name: value for name, value in os.environ.items() if name != 'PYTHONPATH'}
    code = ('import deepknn, deepknn.neighbors.dknn, nets, nlp_utils, text_datasets\n'
            'for m in (deepknn, deepknn.neighbors.dknn, nets, nlp_utils, text_datasets):\n'
            '    print(m.__file__)\n')
    result = subprocess.run([sys.executable, '-c', code], cwd=str(tmp_path), env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    files = result.stdout.split()
    assert len(files) == 5, result.stdout
    for path in files:   # this checkout's files, not another installed copy
        assert os.path.commonpath([os.path.realpath(path), os.path.realpath(ROOT)]) == \
            os.path.realpath(ROOT), ('{} is not from this checkout ({}): reinstall with '
                                     'pip install -e .'.format(path, ROOT))


# ---------------------------------------------------------------- shared flags
def shared_flags():
    """Every option string a deepknn/cli/__init__.py add_* function adds: the shared flags.
    Each function is called on a fresh parser, its other required parameters given
    stand-ins (add_hidden_alias, which adds a flag its caller names, is left out)."""
    import argparse
    import inspect
    import types
    from deepknn import cli
    from deepknn.registry import Registry
    stand_ins = {'registry': types.SimpleNamespace(describe_methods=lambda: '',
                                                    parse_methods=tuple),
                 'scorers': Registry('stand-in'),
                 'default_name': 'x', 'default': None, 'help': 'x'}
    flags = set()
    for name, function in inspect.getmembers(cli, inspect.isfunction):
        if not name.startswith('add_') or name == 'add_hidden_alias':
            continue
        parser = argparse.ArgumentParser(add_help=False)
        required = [p for p in list(inspect.signature(function).parameters.values())[1:]
                    if p.default is inspect.Parameter.empty]
        function(parser, *(stand_ins[p.name] for p in required))
        flags.update(s for action in parser._actions for s in action.option_strings
                     if s.startswith('--'))
    return flags


def defined_flags(source):
    """[(line, flag)] of every add_argument('--flag', ...) call in Python `source`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == 'add_argument':
            found += [(node.lineno, arg.value) for arg in node.args
                      if isinstance(arg, ast.Constant) and isinstance(arg.value, str)
                      and arg.value.startswith('--')]
    return found


def shared_flag_violations(sources, shared):
    """'path:line defines --flag' for each shared flag a command defines by hand;
    `sources`: {path: Python text} of the command files."""
    return ['{}:{} defines {}, a shared flag: add it with its deepknn/cli/__init__.py function'.format(
                path, line, flag)
            for path, text in sorted(sources.items())
            for line, flag in defined_flags(text) if flag in shared]


def command_sources(root=ROOT):
    """{path: text} of the root commands, scripts/ and benchmarks/ (not deepknn/)."""
    sources = {}
    for path in project_files(root):
        if not path.startswith('deepknn/'):
            with open(os.path.join(root, path), encoding='utf-8') as f:
                sources[path] = f.read()
    return sources


def test_a_shared_flag_is_defined_only_in_deepknn_cli():
    shared = shared_flags()
    assert {'--model-setup', '--k', '--backend', '--split', '--limit', '--seed', '--methods',
            '--out', '--name', '--overwrite', '--force', '--layer', '--repeats'} <= shared
    assert shared_flag_violations(command_sources(), shared) == []


def test_a_planted_shared_flag_is_found():
    planted = {'bench_x.py': "import argparse\np = argparse.ArgumentParser()\n"
                             "p.add_argument('--own', type=int)\n"
                             "p.add_argument('--seed', type=int, default=0)\n",
               'cmd.py': "sub.add_argument('--layer', '-l', type=int)\n"}
    assert shared_flag_violations(planted, {'--seed', '--layer'}) == [
        'bench_x.py:4 defines --seed, a shared flag: add it with its deepknn/cli/__init__.py function',
        'cmd.py:1 defines --layer, a shared flag: add it with its deepknn/cli/__init__.py function']
