"""Tests for text-stats-pack."""

import pytest


def test_run_counts():
    from text_stats_pack.tool import run

    result = run("a b a\nc")
    assert result["words"] == 4
    assert result["lines"] == 2
    assert tuple(result["top"][0]) == ("a", 2)


def test_run_top_limits_the_list():
    from text_stats_pack.tool import run

    result = run(text="x y z x y x", top=2)
    assert [w for w, _ in result["top"]] == ["x", "y"]


@pytest.mark.parametrize("text,words", [("", 0), ("one", 1), ("Caf\u00e9 caf\u00e9", 2)])
def test_run_word_totals(text, words):
    from text_stats_pack.tool import run

    assert run(text=text)["words"] == words


def test_run_keeps_unicode():
    from text_stats_pack.tool import run

    assert run("a")["unicode"] == "caf\u00e9 \u2603"

