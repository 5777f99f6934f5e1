"""Voice: speech to text, text to speech, and the text a reply gives the voice to read."""
