"""The model's loads: a model or a server chosen, settings, placements, the tuner, the load."""
