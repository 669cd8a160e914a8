"""Tests for probe-pack."""

import pytest


def test_word_count():
    from probe_pack.tool import word_count

    assert word_count("a bb")["words"] == 2


def test_word_count_longest():
    from probe_pack.tool import word_count

    result = word_count(text="x yyy zz")
    assert result["longest"] == "yyy"
    assert list(result["pair"]) == [1, "two"]


def test_word_count_empty():
    from probe_pack.tool import word_count

    assert word_count("")["longest"] is None


def test_explode():
    from probe_pack.tool import explode

    with pytest.raises(ValueError, match="boom"):
        explode("boom")


def test_chatty_prints_but_answers():
    from probe_pack.tool import chatty

    assert chatty(n=1) == {"printed": 1}
