"""Training and evaluation: the data, the training loop, the warm-up schedule, held-out scores."""
