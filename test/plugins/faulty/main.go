// Command faulty is a trust plugin for fault-injection tests of the plugin
// host. It imports only sdk/, like any third-party plugin.
//
// Plugins get no environment from the host, so the behaviour is chosen by a
// file next to the binary: "<binary path>.mode" holds one mode (default ok):
//
//	ok           Evaluate returns level "trusted"
//	hang         Evaluate blocks forever, ignoring its context
//	crash        Evaluate exits the process with status 1
//	badhandshake print a garbage line to stdout instead of the handshake, exit
//	slowstart    sleep a minute before serving (past any start timeout)
//	spawn        Evaluate starts `sleep 1000` in the plugin's process group and
//	             returns its pid in Reason
//	env          Evaluate returns the plugin's environment, NUL-separated, in Reason
//	wrongkind    Info reports kind "guard"
//	badversion   Info reports only plugin API version 99
//
// Installed under a broker name (agentnode-broker-*), it serves the broker
// kind instead, whatever the mode: Chat answers with the plugin's
// environment, NUL-separated, as the reply's content.
//
// Build: go build -o DIR/agentnode-trust-faulty ./test/plugins/faulty
package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agentnode/agentnode/sdk/broker"
	"github.com/agentnode/agentnode/sdk/plugin"
	"github.com/agentnode/agentnode/sdk/trust"
)

func main() {
	mode := readMode()
	// Created before Serve, which redirects os.Stderr: this logger writes to
	// the real stderr, which the host forwards into its own log.
	logger := plugin.NewLogger("faulty")
	info := plugin.Info{Name: "faulty", Version: "0.0.0-test"}
	switch mode {
	case "badhandshake":
		fmt.Println("hello from a plugin that does not speak go-plugin")
		os.Exit(1)
	case "slowstart":
		time.Sleep(time.Minute)
	case "wrongkind":
		info.Kind = plugin.KindGuard
	case "badversion":
		info.APIVersions = []uint32{99}
	}
	logger.Info("faulty plugin serving", "mode", mode)
	if exe, err := os.Executable(); err == nil && strings.HasPrefix(filepath.Base(exe), "agentnode-broker-") {
		broker.Serve(info, envBroker{})
	}
	trust.Serve(info, &evaluator{mode: mode})
}

// readMode reads "<executable>.mode"; a missing file means "ok".
func readMode() string {
	exe, err := os.Executable()
	if err != nil {
		return "ok"
	}
	b, err := os.ReadFile(exe + ".mode")
	if err != nil {
		return "ok"
	}
	if m := strings.TrimSpace(string(b)); m != "" {
		return m
	}
	return "ok"
}

type evaluator struct{ mode string }

func (e *evaluator) Evaluate(ctx context.Context, req *trust.EvaluateRequest) (*trust.EvaluateResponse, error) {
	switch e.mode {
	case "hang":
		select {}
	case "crash":
		os.Exit(1)
	case "spawn":
		pid, err := spawnSleep()
		if err != nil {
			return nil, err
		}
		return &trust.EvaluateResponse{Level: trust.LevelTrusted, Issuer: "faulty", Reason: strconv.Itoa(pid)}, nil
	case "env":
		return &trust.EvaluateResponse{Level: trust.LevelTrusted, Issuer: "faulty", Reason: strings.Join(os.Environ(), "\x00")}, nil
	}
	return &trust.EvaluateResponse{Level: trust.LevelTrusted, Issuer: "faulty", Reason: "ok " + req.PackageID}, nil
}

// envBroker answers every Chat with the plugin's environment.
type envBroker struct{}

func (envBroker) Chat(context.Context, *broker.ChatRequest) (*broker.ChatResponse, error) {
	return &broker.ChatResponse{Message: broker.Message{Role: broker.RoleAssistant, Content: strings.Join(os.Environ(), "\x00")}}, nil
}

// spawnSleep starts a long sleep in our process group. There is no PATH (the
// host passes no environment), so sleep is looked up in the usual places.
func spawnSleep() (int, error) {
	for _, p := range []string{"/bin/sleep", "/usr/bin/sleep"} {
		if _, err := os.Stat(p); err != nil {
			continue
		}
		cmd := exec.Command(p, "1000")
		if err := cmd.Start(); err != nil {
			return 0, fmt.Errorf("start %s: %w", p, err)
		}
		go cmd.Wait() //nolint:errcheck // reaps the child if it dies before us
		return cmd.Process.Pid, nil
	}
	return 0, fmt.Errorf("no sleep binary found")
}
