"""Faithfulness of word-importance maps: the measures, the runs over every method, the report."""
