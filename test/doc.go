// Package test holds agentnode's end-to-end tests: they build the real
// binaries (agentnode, every bundled plugin, and the test-only plugins in
// test/plugins) and drive the CLI with testscript scripts in
// testdata/script/*.txtar. Keychain tests need a Secret Service: run them
// through test/keyring.sh (make test does).
package test
