package trust

import "testing"

// TestRank: the tiers rank in Levels' order, and a value that is not a
// tier ranks below them all (-1), so a comparison treats it as the lowest.
func TestRank(t *testing.T) {
	if !(Rank(LevelCurated) > Rank(LevelTrusted) && Rank(LevelTrusted) > Rank(LevelVerified) &&
		Rank(LevelVerified) > Rank(LevelUnverified) && Rank(LevelUnverified) > Rank(LevelUnknown) &&
		Rank(LevelUnknown) > Rank("bogus")) {
		t.Error("trust ranks out of order")
	}
	if Rank("bogus") != -1 || Rank(LevelUnknown) != 0 {
		t.Errorf("Rank(bogus) = %d, Rank(unknown) = %d", Rank("bogus"), Rank(LevelUnknown))
	}
}
