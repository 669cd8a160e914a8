package lockfile

// DecoderParseValue is the reference parser (decoder_test.go) for the
// tests in package lockfile_test, which build their lockfiles with the
// writers in cmd/agentnode/lockedit.
var DecoderParseValue = decoderParseValue

// MutableFields are the fields the seal alone covers (mutableFields).
var MutableFields = mutableFields
