"""What is written to disk: result folders, manifests, groups of files, run configurations."""
