"""The models: encoders, pretrained checkpoints, training, and loading a trained run back."""
