"""The application layer's side of the local API: the engine's one queue, the
clients' KV states, the models on offer and the service the server front end uses."""
