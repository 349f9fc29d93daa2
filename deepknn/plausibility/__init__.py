"""Plausibility of word-importance maps against human labels: measures, runs, the report."""
