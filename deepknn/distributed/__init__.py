"""Activations, sharded faiss indexes and DkNN search on a Ray cluster (docs/ray.md)."""
