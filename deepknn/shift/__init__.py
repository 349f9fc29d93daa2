"""Trust under distribution shift: scorers of how far to trust a prediction, and the study (docs/shift.md)."""
