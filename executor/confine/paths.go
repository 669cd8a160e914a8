package confine

import (
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// SystemReadDirs are directory trees a confined tool may read and execute
// from: the system's software. Missing ones are skipped. /etc, /proc, /sys,
// /dev, /run, /var, /tmp, /home, /root, /opt and /srv are not among them;
// /etc contributes only SystemReadFiles and SystemReadEtcDirs.
var SystemReadDirs = []string{
	"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
	"/nix/store",
}

// SystemReadEtcDirs are directories under /etc a tool may read (no
// secrets: CA certificates, loader and interpreter configuration). The
// entries ending in * are glob patterns.
var SystemReadEtcDirs = []string{
	"/etc/ld.so.conf.d", "/etc/ssl/certs", "/etc/ca-certificates", "/etc/pki/tls/certs",
	"/etc/pki/ca-trust/extracted", "/etc/python3*", "/etc/perl", "/etc/java-*",
}

// SystemReadFiles are single files a tool may read. Symlinks (such as
// /etc/resolv.conf into /run) are resolved when the rule is made, so the
// rule covers the target file only.
var SystemReadFiles = []string{
	"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.preload", "/etc/localtime", "/etc/timezone",
	"/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/hosts", "/etc/host.conf",
	"/etc/resolv.conf", "/etc/gai.conf", "/etc/services", "/etc/protocols", "/etc/networks",
	"/etc/mime.types", "/etc/os-release", "/etc/debian_version", "/etc/locale.alias",
	"/etc/ssl/openssl.cnf", "/etc/ca-certificates.conf", "/etc/gitconfig",
	"/dev/random", "/dev/urandom",
	"/proc/cpuinfo", "/proc/meminfo", "/proc/stat", "/proc/loadavg", "/proc/uptime", "/proc/version",
	"/proc/filesystems", "/proc/sys/vm/overcommit_memory",
}

// SystemWriteFiles are device files a tool may read and write.
var SystemWriteFiles = []string{"/dev/null", "/dev/zero", "/dev/full"}

// SysCPU is read-only, for libc's and runtimes' CPU counts.
const SysCPU = "/sys/devices/system/cpu"

// ReadOnlyDirs returns every directory tree besides the package
// directory that a tool may read: SystemReadDirs, SystemReadEtcDirs with
// their patterns expanded, and SysCPU. The patterns are expanded once per
// process. Missing paths are skipped when the rules are made.
func ReadOnlyDirs() []string { return slices.Clone(readOnlyDirs()) }

var readOnlyDirs = sync.OnceValue(func() []string {
	out := append([]string(nil), SystemReadDirs...)
	for _, p := range SystemReadEtcDirs {
		if !strings.HasSuffix(p, "*") {
			out = append(out, p)
			continue
		}
		m, _ := filepath.Glob(p)
		out = append(out, m...)
	}
	return append(out, SysCPU)
})
