"""Tests for flat-notes-pack."""


def test_format_note():
    from flat_notes_pack.tool import format_note

    assert format_note("Hello World")["slug"] == "hello-world"


def test_format_note_body_and_extras():
    from flat_notes_pack.tool import format_note

    result = format_note(title="A  b", body="  text \n", tag="x", due="y")
    assert result["body"] == "text"
    assert result["extra"] == ["due", "tag"]
    assert result["via_pth"]
