"""Deep k-nearest neighbours: the DkNN, its settings, indexes, neighbour rule, caches and evaluation."""
