"""Synthetic GGUFs of real shapes: dense llama models and mixtures of experts."""
