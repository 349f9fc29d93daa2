"""The data: dataset files and readers, splits, word vectors, SST trees and the evaluation-only NLI sets."""
