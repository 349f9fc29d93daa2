"""Training-data attribution: which training examples a prediction rests on (docs/attribution.md).

deepknn/attribution/methods.py registers every method in METHODS (name -> class):

  knn               -L2 distance or cosine similarity in one layer (neighbors.py)
  dknn-vote         in how many DkNN layers a training row is among the k nearest
  representer       representer points, Yeh et al. 2018 (representer.py)
  tracin-last       TracIn over checkpoints, last-layer gradients, Pruthi et al. 2020
  tracin-projected  TracIn over checkpoints, projected all-parameter gradients
  grad-cos          cosine of the final model's gradients (tracin.py)
  trak              TRAK, Park et al. 2023 (trak.py)
  random            seeded uniform scores, the floor (neighbors.py)

The arrays they read are described in base.py; a Chainer model's arrays come from
gradients.py (representations_of, checkpoint_of, per_example_gradients).
"""
