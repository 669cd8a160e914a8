// Command probe is the in-container half of the sandboxtest conformance and
// escape suite. The suite builds it statically (CGO_ENABLED=0, -trimpath)
// into the package directory it hands to the backend, so inside the
// container it is /pack/probe, and runs it once per check:
//
//	/pack/probe <check> [args...]
//
// For a check it prints exactly one JSON line to stdout,
//
//	{"check":"<check>","ok":true,"detail":"..."}
//
// (cpu-limit adds "values" with its measurements, and first prints a line
// saying it waits for the suite on stdin: see checkCPULimit; userns-host-ids
// also waits, for the end of stdin: see checkUsernsHostIDs.)
//
// where ok means "the sandbox held" (the attempt was refused, the resource
// was absent, the limit stopped it), and exits 0. An unknown check prints
// ok=false and exits 2.
//
// A few helper modes print no JSON; the suite uses them for the checks it
// observes from the host side (streams, exit codes, timeouts, floods):
//
//	noop             exit 0
//	exit N           exit with status N
//	sleep SECONDS    sleep, then exit 0
//	cat              copy stdin to stdout, then write a marker to stderr
//	pattern N        write N bytes of a deterministic pattern to stdout
//	flood N          write N bytes of 'A' to stdout as fast as possible
//	mounts           print the mount points as one JSON array
//	abi-host ABI     try getpid through a foreign ABI (int80, x32) and print
//	                 the outcome's token (the suite runs it on the host)
//
// Every attempt the probe makes is harmless when it succeeds on an
// unconfined host (the suite's own tests run it without a sandbox): mounts
// are undone, files it creates are removed, kernel calls are made with
// arguments the kernel rejects after its permission check, forked children
// are killed and reaped.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// result is the one JSON line a check prints.
type result struct {
	Check  string             `json:"check"`
	OK     bool               `json:"ok"`
	Detail string             `json:"detail"`
	Values map[string]float64 `json:"values,omitempty"`
}

// values are the measurements a check reports besides its verdict, for the
// suite to decide by (cpu-limit).
var values map[string]float64

// checkFunc runs one check with the arguments after its name and reports
// whether the sandbox held, with a detail for humans.
type checkFunc func(args []string) (ok bool, detail string)

// checks maps every check name to its implementation. The suite
// (sandboxtest) keeps its own list and a test asserts they agree.
var checks = map[string]checkFunc{
	// identity and privileges
	"uid":          checkUID,
	"gid":          checkGID,
	"cap-eff":      capCheck("CapEff"),
	"cap-prm":      capCheck("CapPrm"),
	"cap-bnd":      capCheck("CapBnd"),
	"cap-inh":      capCheck("CapInh"),
	"cap-amb":      capCheck("CapAmb"),
	"no-new-privs": checkNoNewPrivs,
	"seccomp-mode": checkSeccompMode,
	"rlimits":      checkRlimits,

	// system calls that must be refused
	"sys-mount":             checkMount,
	"sys-umount2":           checkUmount2,
	"sys-unshare-user":      unshareCheck("CLONE_NEWUSER", cloneNewUser),
	"sys-unshare-mount":     unshareCheck("CLONE_NEWNS", cloneNewNS),
	"sys-setns":             checkSetns,
	"sys-ptrace":            checkPtrace,
	"sys-keyctl":            checkKeyctl,
	"sys-bpf":               checkBPF,
	"sys-perf-event-open":   checkPerfEventOpen,
	"sys-open-by-handle-at": checkOpenByHandleAt,
	"sys-kexec-load":        checkKexecLoad,
	"sys-init-module":       checkInitModule,
	"sys-clone-newuser":     checkCloneNewUser,
	"sys-clone3-newuser":    checkClone3NewUser,
	"sys-mptcp-socket":      checkMPTCP,
	"sys-int80":             abiCheck("int80"), // HOSTOUTCOME
	"sys-x32":               abiCheck("x32"),   // HOSTOUTCOME
	"sys-userfaultfd":       checkUserfaultfd,

	// file systems
	"rootfs-readonly":     checkRootfsReadonly,
	"pack-readonly":       checkPackReadonly,
	"proc-sys-readonly":   checkProcSysReadonly,
	"tmp-noexec":          checkTmpNoexec,
	"writable-noexec":     checkWritableNoexec,
	"tmp-writable":        checkTmpWritable,
	"tmp-size-limit":      checkTmpSizeLimit, // BYTES
	"proc-kcore-masked":   checkKcoreMasked,
	"proc-sysrq-masked":   checkSysrqMasked,
	"sys-firmware-masked": checkFirmwareMasked,

	// network
	"net-only-lo":            checkOnlyLo,
	"net-host-loopback":      checkTCPUnreachable, // 127.0.0.1 PORT
	"net-host-ip":            checkTCPUnreachable, // HOSTIP PORT
	"net-host-abstract-unix": checkAbstractUnix,
	"net-metadata":           checkMetadata,
	"net-dns-resolver":       checkDNS, // NAMESERVER
	"net-dns-public":         checkDNS, // 8.8.8.8
	"no-engine-socket":       checkEngineSockets,

	// the host is out of sight
	"env-secret-absent":   checkEnvSecretAbsent, // NAME
	"env-passed":          checkEnvPassed,       // KEY=VALUE
	"host-pids-invisible": checkHostPids,        // SUITEPID SUITESTART INITSTART
	"hostname-isolated":   checkHostname,        // HOSTNAME
	"setuid-no-elevate":   checkSetuid,          // OWNERUID
	"dev-minimal":         checkDevMinimal,

	// resource limits
	"pids-limit":   checkPidsLimit,   // PIDS
	"cpu-limit":    checkCPULimit,    // CPUS SPINNERS TOKEN
	"memory-limit": checkMemoryLimit, // BYTES

	// sealed egress (Spec.EgressSocket)
	"egress-absent":        checkEgressAbsent,      // LISTENADDR SOCKETPATH (a run without egress)
	"egress-proxy-env":     checkEgressEnv,         // URL
	"egress-reaches-host":  checkEgressReachesHost, // HOST
	"egress-net-only-lo":   checkOnlyLo,
	"egress-no-other-way":  checkEgressNoOtherWay,  // ABSTRACTNAME TCPADDR...
	"egress-socket-mount":  checkEgressSocketMount, // PATH
	"egress-pid1-confined": checkEgressPid1,        // FORWARDER

	// a user namespace
	"userns-mapped":    checkUsernsMapped,
	"userns-host-file": checkUsernsHostFile, // PATH...
	"userns-host-ids":  checkUsernsHostIDs,  // TOKEN

	// the second kernel (Config.Runtime gvisor)
	"gvisor-kernel": checkGVisorKernel, // HOSTVERSION
	"gvisor-enosys": checkGVisorENOSYS, // HOSTOUTCOMES

	// a workspace (Spec.Workspace)
	"workspace-cwd":             checkWorkspaceCwd,          // WS TOKEN
	"workspace-readonly":        checkWorkspaceReadonly,     // WS TOKEN
	"workspace-noexec":          checkWorkspaceNoexec("ro"), // WS
	"workspace-confined":        checkWorkspaceConfined,     // WS
	"workspace-writable":        checkWorkspaceWritable,     // WS NAME TOKEN
	"workspace-writable-noexec": checkWorkspaceNoexec("rw"), // WS
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: probe <check> [args...]")
		os.Exit(2)
	}
	name, args := os.Args[1], os.Args[2:]
	if helper(name, args) {
		return
	}
	f, ok := checks[name]
	if !ok {
		emit(result{Check: name, Detail: "unknown check; known: " + strings.Join(checkNames(), " ")})
		os.Exit(2)
	}
	ok, detail := f(args)
	emit(result{Check: name, OK: ok, Detail: detail, Values: values})
}

func checkNames() []string {
	names := make([]string, 0, len(checks))
	for n := range checks {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func emit(r result) {
	b, err := json.Marshal(r)
	if err != nil {
		fmt.Fprintf(os.Stderr, "probe: %v\n", err)
		os.Exit(2)
	}
	b = append(b, '\n')
	if _, err := os.Stdout.Write(b); err != nil {
		os.Exit(3)
	}
}

// stderrMarker is what the cat helper writes to stderr.
const stderrMarker = "sandboxtest-probe-stderr-marker"

// helper runs a helper mode and reports whether name was one.
func helper(name string, args []string) bool {
	switch name {
	case "noop":
	case "exit":
		os.Exit(intArg(args, 0))
	case "sleep":
		time.Sleep(time.Duration(intArg(args, 0)) * time.Second)
	case "cat":
		if _, err := io.Copy(os.Stdout, os.Stdin); err != nil {
			fmt.Fprintf(os.Stderr, "probe: cat: %v\n", err)
			os.Exit(1)
		}
		fmt.Fprintln(os.Stderr, stderrMarker)
	case "pattern":
		if err := writePattern(os.Stdout, int64(intArg(args, 0))); err != nil {
			fmt.Fprintf(os.Stderr, "probe: pattern: %v\n", err)
			os.Exit(1)
		}
	case "abi-host":
		abiHost(args)
	case "enosys-host":
		enosysHost(args)
	case "mounts":
		if err := printMounts(); err != nil {
			fmt.Fprintf(os.Stderr, "probe: mounts: %v\n", err)
			os.Exit(1)
		}
	case "flood":
		buf := []byte(strings.Repeat("A", 64<<10))
		for left := int64(intArg(args, 0)); left > 0; {
			n := min(left, int64(len(buf)))
			if _, err := os.Stdout.Write(buf[:n]); err != nil {
				os.Exit(1)
			}
			left -= n
		}
	default:
		return false
	}
	return true
}

// Pattern returns byte i of the stream the pattern helper writes. The suite
// has its own copy.
func patternByte(i int64) byte { return byte((i*7 + i/251) % 251) }

func writePattern(w io.Writer, n int64) error {
	buf := make([]byte, 32<<10)
	for off := int64(0); off < n; {
		c := min(n-off, int64(len(buf)))
		for j := int64(0); j < c; j++ {
			buf[j] = patternByte(off + j)
		}
		if _, err := w.Write(buf[:c]); err != nil {
			return fmt.Errorf("writing at offset %d: %w", off, err)
		}
		off += c
	}
	return nil
}

// intArg parses args[i], exiting with status 2 when it is missing or not a
// number: a suite/probe mismatch, never a sandbox verdict.
func intArg(args []string, i int) int {
	if i >= len(args) {
		fmt.Fprintf(os.Stderr, "probe: missing argument %d\n", i+1)
		os.Exit(2)
	}
	n, err := strconv.Atoi(args[i])
	if err != nil {
		fmt.Fprintf(os.Stderr, "probe: argument %d: %v\n", i+1, err)
		os.Exit(2)
	}
	return n
}

// arg returns args[i] or "" when it is missing.
func arg(args []string, i int) string {
	if i >= len(args) {
		return ""
	}
	return args[i]
}
