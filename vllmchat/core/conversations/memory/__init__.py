"""What a conversation keeps in context: the context policy, summaries and facts."""
