"""A chat session's turns: the reply told apart as it streams, saved KV states, and
the work done while the user reads (titles, summaries ahead)."""
