"""Tests for text-stats-pack."""


def test_run_counts():
    from text_stats_pack.tool import run

    result = run("a b a\nc")
    assert result["words"] == 4
    assert result["lines"] == 2
    assert tuple(result["top"][0]) == ("a", 2)
