"""Pieces every layer uses: errors, the one Future, pickling, source locations."""
