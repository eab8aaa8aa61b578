"""Beam-free text → text: Wikipedia dumps and wikitext, book files, sentence splitting, and
WordPiece from word counts. Pure functions over strings and byte chunks, tested on literal
input."""
