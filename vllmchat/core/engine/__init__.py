"""The llama.cpp engine: the client the app talks to (``client``), its events
(``events``), and the child process that holds llama.cpp (``process``)."""
