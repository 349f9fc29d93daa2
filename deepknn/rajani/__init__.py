"""Rajani et al. 2020: kNN over hidden representations (backoff, influential and mislabeled training examples)."""
