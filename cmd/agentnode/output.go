package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/agentnode/agentnode/cmd/agentnode/termsafe"
	"github.com/agentnode/agentnode/kernel/reason"
)

// writeJSON prints v as one line of JSON. encoding/json escapes the C0
// controls (ESC is \u001b); termsafe.JSON escapes what it leaves (DEL, C1
// and bidi controls, invalid UTF-8 in a json.RawMessage) the same way, so
// the document decodes to the same value and prints harmlessly.
func writeJSON(w io.Writer, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(termsafe.JSON(buf.Bytes()))
	return err
}

// refusal is the JSON shape of a refusal (specs/cli.md, Reason codes).
type refusal struct {
	Decision string `json:"decision"`
	Code     string `json:"code"`
	Reason   string `json:"reason"`
}

// fail reports err and returns the failure that sets the exit code from
// err's reason code. With jsonOut a refusal object goes to stdout, otherwise
// a message to stderr. An error without a reason code exits 1.
func fail(cmd *cobra.Command, jsonOut bool, err error) error {
	code := reason.CodeOf(err)
	exit := reason.ExitFailed
	if code != "" {
		exit = code.ExitCode()
	}
	var f *failure
	if asFailure(err, &f) {
		exit = f.exit
	}
	if jsonOut {
		c := string(code)
		if c == "" {
			c = "error"
		}
		_ = writeJSON(cmd.OutOrStdout(), refusal{Decision: "deny", Code: c, Reason: err.Error()})
	} else if code != "" {
		fmt.Fprintf(cmd.ErrOrStderr(), "agentnode: %s [%s]\n", termsafe.Text(err.Error()), code)
	} else {
		fmt.Fprintf(cmd.ErrOrStderr(), "agentnode: %s\n", termsafe.Text(err.Error()))
	}
	return &failure{exit: exit, err: err, printed: true}
}

func asFailure(err error, f **failure) bool {
	for err != nil {
		if x, ok := err.(*failure); ok {
			*f = x
			return true
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		err = u.Unwrap()
	}
	return false
}
