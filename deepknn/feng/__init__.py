"""Feng et al. 2018: input reduction and entropy regularisation on reduced inputs."""
