"""Measures shared by every study, each defined once: rankings (ranking.py), bootstrap intervals (statistics.py)."""
