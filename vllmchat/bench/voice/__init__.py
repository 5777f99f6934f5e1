"""The voice: speech to text and text to speech, timed and checked against each other."""
