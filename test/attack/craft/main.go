// Command craft writes the hostile files of the attack suite that a
// txtar archive cannot hold or would be too large to: deeply nested YAML
// and JSON, bytes that are not UTF-8, FIFOs and huge files.
//
//	craft deep-yaml-seq N FILE        "- " N times, then x: N nested block sequences on one line
//	craft deep-yaml-flow N FILE       N nested flow sequences: [[[...]]]
//	craft deep-schema N IN OUT        IN with "input_schema: {type: object}" replaced by N nested {not: ...}
//	craft deep-config N IN OUT        IN (a config) with N nested objects as the value of "x" in its trust section
//	craft append-bytes FILE HEX...    append raw bytes (given in hex) to FILE
//	craft mkfifo FILE                 make a FIFO nobody writes to
//	craft sparse FILE BYTES           make a sparse file of BYTES bytes
package main

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "craft:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) < 2 {
		return fmt.Errorf("usage: craft deep-yaml-seq|deep-yaml-flow|deep-schema|deep-config|append-bytes|mkfifo|sparse ARGS")
	}
	n := func(s string) int {
		v, err := strconv.Atoi(s)
		if err != nil {
			fmt.Fprintln(os.Stderr, "craft: bad number", s)
			os.Exit(2)
		}
		return v
	}
	switch cmd := args[0]; {
	case cmd == "deep-yaml-seq" && len(args) == 3:
		return os.WriteFile(args[2], []byte(strings.Repeat("- ", n(args[1]))+"x\n"), 0o644)
	case cmd == "deep-yaml-flow" && len(args) == 3:
		k := n(args[1])
		return os.WriteFile(args[2], []byte(strings.Repeat("[", k)+strings.Repeat("]", k)+"\n"), 0o644)
	case cmd == "deep-schema" && len(args) == 4:
		k := n(args[1])
		return replaceIn(args[2], args[3], "input_schema: {type: object}",
			"input_schema: "+strings.Repeat("{not: ", k)+"{}"+strings.Repeat("}", k))
	case cmd == "deep-config" && len(args) == 4:
		k := n(args[1])
		return replaceIn(args[2], args[3], `"trust": {`,
			`"trust": {"x": `+strings.Repeat(`{"a": `, k)+`1`+strings.Repeat(`}`, k)+`, `)
	case cmd == "append-bytes":
		var b []byte
		for _, h := range args[2:] {
			x, err := hex.DecodeString(h)
			if err != nil {
				return err
			}
			b = append(b, x...)
		}
		f, err := os.OpenFile(args[1], os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return err
		}
		if _, err := f.Write(b); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	case cmd == "mkfifo" && len(args) == 2:
		return syscall.Mkfifo(args[1], 0o600)
	case cmd == "sparse" && len(args) == 3:
		f, err := os.Create(args[1])
		if err != nil {
			return err
		}
		if err := f.Truncate(int64(n(args[2]))); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	return fmt.Errorf("bad arguments %q", args)
}

func replaceIn(in, out, old, new string) error {
	data, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	if !bytes.Contains(data, []byte(old)) {
		return fmt.Errorf("%s has no %q", in, old)
	}
	return os.WriteFile(out, bytes.Replace(data, []byte(old), []byte(new), 1), 0o644)
}
