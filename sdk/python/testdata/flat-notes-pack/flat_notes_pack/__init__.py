"""flat-notes-pack: format a note."""
