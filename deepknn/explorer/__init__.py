"""The explorer (explore.py): a local web app and a static export over one trained run."""
