package policy

// Risk is riskScore and its band for a list of actions, as the tests state
// their cases.
func Risk(actions []Action, trustLevel string, env Env) (int, Band) {
	score := riskScore(SetOf(actions), trustLevel, env)
	return score, BandOf(score)
}
