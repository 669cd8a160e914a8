"""Tests for probe-pack."""

import pytest


def test_word_count():
    from probe_pack.tool import word_count

    assert word_count("a bb")["words"] == 2


def test_explode():
    from probe_pack.tool import explode

    with pytest.raises(ValueError):
        explode("boom")
