"""deep-knn: Deep k-Nearest Neighbors for text classifiers, and the interpretation methods built on it."""
