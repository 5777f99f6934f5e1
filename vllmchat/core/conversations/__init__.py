"""Conversations: a durable store, the context budget, summaries, saved KV states."""
