"""What every part of the window uses: the theme and the background worker."""
