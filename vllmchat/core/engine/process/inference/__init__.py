"""A loaded model at work: the runtime, decoding with speculation and draft models,
turns, speed measurement and scoring."""
