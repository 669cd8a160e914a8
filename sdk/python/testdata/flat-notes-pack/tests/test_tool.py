"""Tests for flat-notes-pack."""


def test_format_note():
    from flat_notes_pack.tool import format_note

    assert format_note("Hello World")["slug"] == "hello-world"
