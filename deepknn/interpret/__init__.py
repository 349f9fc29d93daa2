"""Word-importance maps: the interpretation methods, their registry, and leave-one-out."""
