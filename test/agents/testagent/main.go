// Command testagent is the agent of the end-to-end tests: a static Go
// program (CGO_ENABLED=0, it runs in the busybox-static sandbox image)
// that speaks the agent protocol of specs/agent.md on stdin/stdout.
//
// Its tool input lists steps, run in order; the result is the list of what
// each step got back:
//
//	{"steps":[
//	  {"run_tool":{"package":P,"tool":T,"input":{...}}},   one run_tool request
//	  {"call_llm":{"n":N,"provider":P,"model":M}},        N call_llm requests
//	  {"raw":"LINE"},                                      LINE as written (protocol tests)
//	  {"dump":true},                                       environment, arguments, processes, files
//	  {"loop":true}                                        spin until killed
//	]}
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

type step struct {
	RunTool *struct {
		Package string          `json:"package"`
		Tool    string          `json:"tool"`
		Input   json.RawMessage `json:"input"`
	} `json:"run_tool"`
	CallLLM *struct {
		N        int    `json:"n"`
		Provider string `json:"provider"`
		Model    string `json:"model"`
	} `json:"call_llm"`
	Raw  *string `json:"raw"`
	Dump bool    `json:"dump"`
	Loop bool    `json:"loop"`
}

var (
	in  = bufio.NewReaderSize(os.Stdin, 1<<20)
	out = bufio.NewWriter(os.Stdout)
	id  = 0
)

func main() {
	var req struct {
		Tool  string `json:"tool"`
		Input struct {
			Steps []step `json:"steps"`
		} `json:"input"`
	}
	line, err := in.ReadBytes('\n')
	if err != nil {
		fail("read the request: " + err.Error())
	}
	if err := json.Unmarshal(line, &req); err != nil {
		fail("decode the request: " + err.Error())
	}
	var results []any
	for _, s := range req.Input.Steps {
		switch {
		case s.RunTool != nil:
			results = append(results, call(map[string]any{"type": "run_tool", "package": s.RunTool.Package,
				"tool": s.RunTool.Tool, "input": s.RunTool.Input}))
		case s.CallLLM != nil:
			var replies []any
			for i := 0; i < s.CallLLM.N; i++ {
				m := map[string]any{"type": "call_llm", "model": s.CallLLM.Model,
					"messages": []map[string]string{{"role": "user", "content": fmt.Sprintf("ping %d", i+1)}}}
				if s.CallLLM.Provider != "" {
					m["provider"] = s.CallLLM.Provider
				}
				replies = append(replies, call(m))
			}
			results = append(results, replies)
		case s.Raw != nil:
			fmt.Fprintln(out, *s.Raw)
			out.Flush()
			l, err := in.ReadBytes('\n')
			results = append(results, map[string]any{"reply": string(l), "err": errString(err)})
		case s.Dump:
			results = append(results, dump())
		case s.Loop:
			for n := 0; ; n++ {
				_ = n * n
			}
		}
	}
	send(map[string]any{"type": "result", "ok": true, "result": results})
}

// call sends one request and returns the host's reply.
func call(m map[string]any) any {
	id++
	m["id"] = fmt.Sprintf("r%d", id)
	send(m)
	l, err := in.ReadBytes('\n')
	if err != nil {
		fail("read the reply: " + err.Error())
	}
	var rep any
	if err := json.Unmarshal(l, &rep); err != nil {
		fail("decode the reply: " + err.Error())
	}
	return rep
}

func send(m map[string]any) {
	b, err := json.Marshal(m)
	if err != nil {
		fail(err.Error())
	}
	out.Write(append(b, '\n'))
	out.Flush()
}

func fail(msg string) {
	b, _ := json.Marshal(map[string]any{"type": "result", "ok": false, "error": msg})
	out.Write(append(b, '\n'))
	out.Flush()
	os.Exit(1)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// dump is everything the agent can see that could hold a leaked secret:
// its environment and arguments, every visible process's command line and
// environment, and every file it can read (content up to 256 KiB; the
// image's and the package's larger files are grepped on the host).
func dump() map[string]any {
	procs := map[string]map[string]string{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if strings.Trim(e.Name(), "0123456789") != "" {
			continue
		}
		p := map[string]string{}
		for _, f := range []string{"cmdline", "environ"} {
			b, err := os.ReadFile(filepath.Join("/proc", e.Name(), f))
			if err != nil {
				p[f] = "error: " + err.Error()
				continue
			}
			p[f] = strings.ReplaceAll(string(b), "\x00", " ")
		}
		procs[e.Name()] = p
	}
	files := map[string]string{}
	big := map[string]int64{}
	_ = filepath.WalkDir("/", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && (p == "/proc" || p == "/sys" || p == "/dev") {
			return fs.SkipDir
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		if info.Size() > 256<<10 {
			big[p] = info.Size()
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			files[p] = "error: " + err.Error()
			return nil
		}
		files[p] = string(b)
		return nil
	})
	return map[string]any{"env": os.Environ(), "args": os.Args, "uid": os.Getuid(), "procs": procs,
		"files": files, "big_files": big}
}
