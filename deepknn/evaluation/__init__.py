"""Measures shared by every study, each defined once: rankings, bootstrap intervals, calibration, selective prediction, conformal sets, training-data attribution."""
