"""Where the model runs: the placement proposed and applied, and the tuner."""
