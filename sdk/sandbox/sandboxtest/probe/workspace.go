package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// The workspace checks run with Spec.Workspace set: the suite's host
// directory WS, holding data.txt (the token TOKEN, mode 0666) and exe (an
// executable copy of the probe, mode 0755), in a directory WS's parent
// whose other entry, outside.txt, the sandbox must not see. WS itself is
// mode 0777: only the mount stands in the way of writing it.

// wsMount checks the mount at ws: nosuid, nodev, noexec, and ro or rw as
// mode says.
func wsMount(ws, mode string) attempt {
	m, ok, err := mountAt(ws)
	switch {
	case err != nil:
		return att(false, err.Error())
	case !ok:
		return att(false, ws+" is not a mount point")
	}
	var missing []string
	want := []string{mode, "nosuid", "nodev", "noexec"}
	if underGVisor() {
		// gVisor ignores nosuid and nodev and does not show them: its
		// tasks always have no_new_privs (setuid never elevates) and its
		// gofer opens no host device node.
		want = []string{mode, "noexec"}
	}
	for _, o := range want {
		if !m.has(o) {
			missing = append(missing, o)
		}
	}
	if len(missing) > 0 {
		return att(false, fmt.Sprintf("%s is mounted %s, without %s", ws, strings.Join(m.options, ","), strings.Join(missing, ",")))
	}
	return att(true, fmt.Sprintf("%s is mounted %s", ws, strings.Join(m.options, ",")))
}

// wsCwd checks that the working directory is ws.
func wsCwd(ws string) attempt {
	cwd, err := os.Getwd()
	switch {
	case err != nil:
		return att(false, "getcwd: "+errText(err))
	case cwd != ws:
		return att(false, fmt.Sprintf("the working directory is %s, not the workspace %s", cwd, ws))
	}
	return att(true, "the working directory is the workspace")
}

// wsReads checks that data.txt, by its relative name, holds token.
func wsReads(token string) attempt {
	b, err := os.ReadFile("data.txt")
	switch {
	case err != nil:
		return att(false, "reading data.txt: "+errText(err))
	case string(b) != token:
		return att(false, fmt.Sprintf("data.txt holds %q, want %q", b, token))
	}
	return att(true, "data.txt read")
}

// erofs reports whether err is EROFS, the refusal of a read-only mount
// (and not, say, EACCES from the file's mode, which the suite made
// writable by all).
func erofs(what string, err error) attempt {
	switch {
	case err == nil:
		return att(false, what+": done")
	case errors.Is(err, unix.EROFS):
		return att(true, what+": EROFS")
	}
	return att(false, what+": "+errText(err)+", not EROFS")
}

// checkWorkspaceCwd: WS TOKEN.
func checkWorkspaceCwd(args []string) (bool, string) {
	if len(args) != 2 {
		return false, "usage: workspace-cwd WS TOKEN"
	}
	return all(wsCwd(args[0]), wsReads(args[1]))
}

// checkWorkspaceReadonly: WS TOKEN. Every way of changing the workspace
// fails with EROFS; reading it works.
func checkWorkspaceReadonly(args []string) (bool, string) {
	if len(args) != 2 {
		return false, "usage: workspace-readonly WS TOKEN"
	}
	ws := args[0]
	data := filepath.Join(ws, "data.txt")
	res := []attempt{wsMount(ws, "ro"), wsReads(args[1])}
	f, err := os.OpenFile(data, os.O_WRONLY|os.O_APPEND, 0)
	if err == nil {
		f.Close()
	}
	res = append(res, erofs("opening data.txt for writing", err))
	name := filepath.Join(ws, fmt.Sprintf(".sandboxtest-probe-%d", os.Getpid()))
	f, err = os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err == nil {
		f.Close()
		os.Remove(name)
	}
	res = append(res, erofs("creating a file", err))
	err = os.Mkdir(name+".d", 0o700)
	if err == nil {
		os.Remove(name + ".d")
	}
	res = append(res, erofs("making a directory", err))
	err = os.Rename(data, data+".moved")
	if err == nil {
		os.Rename(data+".moved", data)
	}
	res = append(res, erofs("renaming data.txt", err))
	err = unix.Chmod(data, 0o644)
	if err == nil {
		unix.Chmod(data, 0o666)
	}
	if underGVisor() && errors.Is(err, unix.EPERM) {
		// gVisor checks ownership (data.txt is not the sandbox user's)
		// before the read-only mount: refused all the same.
		err = unix.EROFS
	}
	res = append(res, erofs("chmod data.txt", err))
	return all(res...)
}

// checkWorkspaceNoexec: WS, mounted mode (ro or rw). The workspace is
// nosuid, nodev and noexec: the executable the host put there cannot be
// run, nor (rw) one the process writes there.
func checkWorkspaceNoexec(mode string) checkFunc {
	return func(args []string) (bool, string) {
		if len(args) != 1 {
			return false, "usage: workspace-noexec WS"
		}
		return workspaceNoexec(args[0], mode)
	}
}

func workspaceNoexec(ws, mode string) (bool, string) {
	res := []attempt{wsMount(ws, mode)}
	err := exec.Command(filepath.Join(ws, "exe"), "noop").Run()
	switch {
	case err == nil:
		res = append(res, att(false, "executed the workspace's exe"))
	case errors.Is(err, unix.EACCES):
		res = append(res, att(true, "exec of the workspace's exe: "+errText(err)))
	default:
		res = append(res, att(false, "exec of the workspace's exe failed with "+errText(err)+", not EACCES"))
	}
	if mode == "rw" {
		res = append(res, noExecIn(ws, true))
	}
	return all(res...)
}

// checkWorkspaceConfined: WS. Nothing beside the workspace is there: not
// its sibling outside.txt, by path or through "..", and the parent lists
// no other entry.
func checkWorkspaceConfined(args []string) (bool, string) {
	if len(args) != 1 {
		return false, "usage: workspace-confined WS"
	}
	ws := args[0]
	parent := filepath.Dir(ws)
	var res []attempt
	for _, p := range []string{filepath.Join(parent, "outside.txt"), ws + "/../outside.txt", "../outside.txt"} {
		if b, err := os.ReadFile(p); err == nil {
			res = append(res, att(false, fmt.Sprintf("read %s beside the workspace: %q", p, b)))
		} else {
			res = append(res, att(true, p+": "+errText(err)))
		}
	}
	ents, err := os.ReadDir(parent)
	if err == nil {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		if slices.ContainsFunc(names, func(n string) bool { return n != filepath.Base(ws) }) {
			res = append(res, att(false, fmt.Sprintf("the workspace's parent %s lists %v", parent, names)))
		} else {
			res = append(res, att(true, fmt.Sprintf("the parent lists only %v", names)))
		}
	} else {
		res = append(res, att(true, "the parent: "+errText(err)))
	}
	return all(res...)
}

// checkWorkspaceWritable: WS NAME TOKEN. The workspace (its working
// directory) is mounted rw, nosuid, nodev, noexec, and NAME can be
// written there (relative) with TOKEN, which the suite reads on the host.
func checkWorkspaceWritable(args []string) (bool, string) {
	if len(args) != 3 {
		return false, "usage: workspace-writable WS NAME TOKEN"
	}
	ws, name, token := args[0], args[1], args[2]
	cwd := wsCwd(ws)
	res := []attempt{cwd, wsMount(ws, "rw")}
	if !cwd.ok {
		// Written nowhere else: without a sandbox the working directory
		// is the suite's.
		return all(res...)
	}
	if err := os.WriteFile(name, []byte(token), 0o644); err != nil {
		res = append(res, att(false, "writing "+name+": "+errText(err)))
	} else {
		res = append(res, att(true, "wrote "+name))
	}
	return all(res...)
}
