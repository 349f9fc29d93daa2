import os
import sys

import matplotlib

matplotlib.use('Agg')
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..'))
# Tests pass data folders explicitly; the caller's DKNN_DATA_DIR must not leak in
# (cleared at import so module-scoped fixtures do not see it either).
os.environ.pop('DKNN_DATA_DIR', None)
