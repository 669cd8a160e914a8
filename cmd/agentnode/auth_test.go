package main

// `agentnode auth` against a real OS keychain and real local HTTP servers
// standing in for the providers. Run with
//
//	AGENTNODE_REQUIRE_KEYRING=1 test/keyring.sh go test -run Auth ./cmd/agentnode/
//
// Without a keychain the keychain tests skip, unless
// AGENTNODE_REQUIRE_KEYRING=1.

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentnode/agentnode/cmd/agentnode/configedit"
	"github.com/agentnode/agentnode/kernel/keychain"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/sdk/broker/provider"
)

const authMarker = "PROVIDER-BODY-MARKER"

// cliRun is one CLI invocation's result.
type cliRun struct {
	code        int
	out, errOut string
}

// authCLI runs the CLI with stdin and keeps every output, so that a test
// can check at the end that no secret was ever printed.
type authCLI struct {
	t    *testing.T
	runs []cliRun
}

func (c *authCLI) run(stdin string, args ...string) cliRun {
	c.t.Helper()
	var out, errOut bytes.Buffer
	code := execute(args, strings.NewReader(stdin), &out, &errOut)
	r := cliRun{code, out.String(), errOut.String()}
	c.runs = append(c.runs, r)
	return r
}

// expect runs args and fails unless the exit code is code.
func (c *authCLI) expect(code int, stdin string, args ...string) cliRun {
	c.t.Helper()
	r := c.run(stdin, args...)
	if r.code != code {
		c.t.Fatalf("%v: exit %d, want %d\nstdout %s\nstderr %s", args, r.code, code, r.out, r.errOut)
	}
	return r
}

// neverShows fails if any output so far, or any file under dir, contains
// one of secrets.
func (c *authCLI) neverShows(dir string, secrets ...string) {
	c.t.Helper()
	for _, r := range c.runs {
		for _, s := range secrets {
			if strings.Contains(r.out, s) || strings.Contains(r.errOut, s) {
				c.t.Errorf("output shows %q:\nstdout %s\nstderr %s", s, r.out, r.errOut)
			}
		}
	}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, s := range secrets {
			if bytes.Contains(b, []byte(s)) {
				c.t.Errorf("%s contains %q", path, s)
			}
		}
		return nil
	})
	if err != nil {
		c.t.Fatal(err)
	}
}

// providerServer is a real HTTP server answering the models request of one
// API: 200 for the expected token in the expected header, 401 otherwise,
// or a forced status. Every body carries a marker that must never be shown.
type providerServer struct {
	*httptest.Server
	mu     sync.Mutex
	token  string
	force  int
	hits   int
	badReq []string
}

func newProviderServer(t *testing.T, api, token string) *providerServer {
	p := &providerServer{token: token}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.hits++
		wantPath, got := "/v1/models", ""
		switch api {
		case provider.Anthropic:
			got = r.Header.Get("X-Api-Key")
			if r.Header.Get("Anthropic-Version") != provider.AnthropicVersion || r.Header.Get("Authorization") != "" {
				p.badReq = append(p.badReq, "anthropic headers")
			}
		default:
			got = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
			if r.Header.Get("X-Api-Key") != "" {
				p.badReq = append(p.badReq, "x-api-key on an openai request")
			}
		}
		if r.Method != http.MethodGet || r.URL.Path != wantPath || r.URL.RawQuery != "" {
			p.badReq = append(p.badReq, r.Method+" "+r.URL.String())
		}
		// The token only in its one header.
		for name, vs := range r.Header {
			if name == "Authorization" || name == "X-Api-Key" {
				continue
			}
			for _, v := range vs {
				if got != "" && strings.Contains(v, got) {
					p.badReq = append(p.badReq, "token in header "+name)
				}
			}
		}
		status := http.StatusOK
		if got != p.token {
			status = http.StatusUnauthorized
		}
		if p.force != 0 {
			status = p.force
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, `{"data":[],"error":"`+authMarker+` got `+got+`"}`)
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *providerServer) set(token string, force int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.token, p.force = token, force
}

func (p *providerServer) check(t *testing.T, wantHits int) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.hits != wantHits || len(p.badReq) > 0 {
		t.Fatalf("provider: %d requests (want %d), bad: %v", p.hits, wantHits, p.badReq)
	}
}

// secretTool runs libsecret's secret-tool, an independent Secret Service
// client, when it is installed.
func secretTool(t *testing.T, args ...string) (string, bool) {
	t.Helper()
	if _, err := exec.LookPath("secret-tool"); err != nil {
		return "", false
	}
	out, err := exec.Command("secret-tool", args...).Output()
	if err != nil {
		return "", true
	}
	return string(out), true
}

func randomName(t *testing.T, prefix string) string {
	t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return prefix + hex.EncodeToString(b)
}

func TestAuthRoundTrip(t *testing.T) {
	requireTrustKeyring(t)
	dir := trustHome(t)
	cfgPath := filepath.Join(dir, "config.json")
	secret := randomName(t, "sk-Secret-")
	wrong := randomName(t, "sk-Wrong-")
	oai := newProviderServer(t, provider.OpenAI, secret)
	ant := newProviderServer(t, provider.Anthropic, secret)
	name := randomName(t, "authtest-")
	aname := name + "-ant"
	for n, v := range map[string]string{
		name:  `{"api":"openai","base_url":"` + oai.URL + `/v1"}`,
		aname: `{"api":"anthropic","base_url":"` + ant.URL + `"}`,
	} {
		if err := configedit.Set(cfgPath, "llm.providers."+n, v); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = keychain.Delete(provider.KeychainService(n), provider.KeychainUser) })
	}
	cfgBefore, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	cli := &authCLI{t: t}

	// Nothing stored yet.
	r := cli.expect(authNotConfigured, "", "auth", "test", name)
	if !strings.Contains(r.out, "not configured") || !strings.Contains(r.out, "agentnode auth set "+name) {
		t.Errorf("test before set: %s", r.out)
	}
	oai.check(t, 0)

	// set from stdin: one line, the newline is not part of the token.
	r = cli.expect(0, secret+"\r\n", "auth", "set", name)
	if !strings.Contains(r.errOut, "stored the token of "+name) || !strings.Contains(r.errOut, "agentnode:"+name) {
		t.Errorf("set: %s", r.errOut)
	}
	if got, err := keychain.Get("agentnode:"+name, "token"); err != nil || got != secret {
		t.Fatalf("keychain holds %q, %v", got, err)
	}
	if got, ok := secretTool(t, "lookup", "service", "agentnode:"+name, "username", "token"); ok && got != secret {
		t.Fatalf("secret-tool sees %q, want the stored token", got)
	}
	t.Setenv("AUTH_TEST_TOKEN", " "+secret+" ")
	cli.expect(0, "", "auth", "set", aname, "--from-env", "AUTH_TEST_TOKEN")

	r = cli.expect(0, "", "auth", "list")
	if !strings.Contains(r.out, name+"\tagentnode:"+name+"\n") || !strings.Contains(r.out, aname+"\t") {
		t.Errorf("list: %s", r.out)
	}
	r = cli.expect(0, "", "auth", "list", "--json")
	var list struct{ Providers []knownProvider }
	if err := json.Unmarshal([]byte(r.out), &list); err != nil {
		t.Fatalf("list --json %q: %v", r.out, err)
	}
	var listed int
	for _, p := range list.Providers {
		if p.Name == name && p.Source == "config" && p.API == "openai" && p.BaseURL == oai.URL+"/v1" && p.Service == "agentnode:"+name {
			listed++
		}
	}
	if listed != 1 {
		t.Errorf("list --json: %+v", list)
	}

	r = cli.expect(0, "", "auth", "status", "--json")
	var st authStatus
	if err := json.Unmarshal([]byte(r.out), &st); err != nil {
		t.Fatalf("status --json %q: %v", r.out, err)
	}
	seen := map[string]authProviderStatus{}
	for _, p := range st.Providers {
		seen[p.Name] = p
	}
	if !st.Keychain.Available || st.Config != cfgPath || !seen[name].Configured || !seen[aname].Configured ||
		seen["openai"].Source != "builtin" || seen["anthropic"].BaseURL != "https://api.anthropic.com" {
		t.Errorf("status: %+v", st)
	}
	r = cli.expect(0, "", "auth", "status")
	if !strings.Contains(r.out, "keychain: available") || !strings.Contains(r.out, name+" ") {
		t.Errorf("status: %s", r.out)
	}

	// test: the token arrives in the right header only; 2xx is valid.
	r = cli.expect(authValid, "", "auth", "test", name)
	if !strings.Contains(r.out, "valid (HTTP 200 from "+oai.URL+"/v1/models)") {
		t.Errorf("test: %s", r.out)
	}
	oai.check(t, 1)
	r = cli.expect(authValid, "", "auth", "test", aname, "--json")
	var res authTestResult
	if err := json.Unmarshal([]byte(r.out), &res); err != nil || res.Result != "valid" || res.HTTPStatus != 200 || res.URL != ant.URL+"/v1/models" {
		t.Errorf("test --json: %q, %v", r.out, err)
	}
	ant.check(t, 1)

	// A token the provider does not accept: rejected, exit 1.
	t.Setenv("AUTH_TEST_TOKEN", wrong)
	r = cli.expect(0, "", "auth", "set", name, "--from-env", "AUTH_TEST_TOKEN")
	if !strings.Contains(r.errOut, "replaced the token") {
		t.Errorf("set again: %s", r.errOut)
	}
	r = cli.expect(authRejected, "", "auth", "test", name)
	if !strings.Contains(r.out, "rejected (HTTP 401") {
		t.Errorf("test rejected: %s", r.out)
	}
	oai.set(secret, http.StatusForbidden)
	cli.expect(authRejected, "", "auth", "test", name)
	// Other statuses and an unreachable provider: indeterminate, exit 3.
	for _, status := range []int{http.StatusInternalServerError, http.StatusNotFound, http.StatusTooManyRequests, http.StatusFound} {
		oai.set(secret, status)
		cli.expect(authIndeterminate, "", "auth", "test", name)
	}
	oai.check(t, 7)
	if cfg, err := os.ReadFile(cfgPath); err != nil || !bytes.Equal(cfg, cfgBefore) {
		t.Fatalf("auth commands changed the config (%v):\n%s", err, cfg)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	_ = l.Close()
	if err := configedit.Set(cfgPath, "llm.providers."+name+".base_url", "http://"+closed+"/v1"); err != nil {
		t.Fatal(err)
	}
	if cfgBefore, err = os.ReadFile(cfgPath); err != nil {
		t.Fatal(err)
	}
	r = cli.expect(authIndeterminate, "", "auth", "test", name, "--json")
	if err := json.Unmarshal([]byte(r.out), &res); err != nil || res.Result != "indeterminate" || !strings.Contains(res.Detail, "cannot connect") {
		t.Errorf("unreachable: %q, %v", r.out, err)
	}

	// remove; a second remove has nothing to remove.
	r = cli.expect(0, "", "auth", "remove", name)
	if !strings.Contains(r.errOut, "removed the token of "+name) {
		t.Errorf("remove: %s", r.errOut)
	}
	if _, err := keychain.Get("agentnode:"+name, "token"); err == nil {
		t.Fatal("token still in the keychain after remove")
	}
	r = cli.expect(reason.ExitUsage, "", "auth", "remove", name)
	if !strings.Contains(r.errOut, "no token stored for "+name) || !strings.Contains(r.errOut, "[credentials_missing]") {
		t.Errorf("second remove: %s", r.errOut)
	}
	cli.expect(authNotConfigured, "", "auth", "test", name)
	r = cli.expect(0, "", "auth", "list")
	if strings.Contains(r.out, name+"\t") {
		t.Errorf("list after remove: %s", r.out)
	}

	// auth never writes the config; tokens and provider text never show.
	if cfg, err := os.ReadFile(cfgPath); err != nil || !bytes.Equal(cfg, cfgBefore) {
		t.Fatalf("auth commands changed the config (%v):\n%s", err, cfg)
	}
	cli.neverShows(dir, secret, wrong, authMarker)
}

// TestAuthSetRefusesBadInput: every way of passing a token wrongly is
// refused with exit 2, shows nothing of it and stores nothing.
func TestAuthSetRefusesBadInput(t *testing.T) {
	requireTrustKeyring(t)
	dir := trustHome(t)
	name := randomName(t, "authbad-")
	t.Cleanup(func() { _ = keychain.Delete(provider.KeychainService(name), provider.KeychainUser) })
	secret := "sk-" + randomName(t, "Leak")
	t.Setenv("AUTH_EMPTY", "")
	cases := []struct {
		stdin string
		args  []string
		want  string
	}{
		{secret, []string{"auth", "set", name, secret}, "never from the command line"},
		{"", []string{"auth", "set", secret}, "not a valid provider name"},
		{"", []string{"auth", "set", name, "--token=" + secret}, "unknown or malformed flag"},
		{"", []string{"auth", "set", name, "-t" + secret}, "unknown or malformed flag"},
		{"", []string{"auth", "set", name, "--from-env", secret}, "name of an environment variable"},
		{"", []string{"auth", "set", name, "--from-env", "AUTH_EMPTY"}, "AUTH_EMPTY is not set or empty"},
		{"", []string{"auth", "set", name, "--from-env", "AUTH_UNSET_" + strings.ToUpper(name[8:])}, "is not set or empty"},
		{"", []string{"auth", "set", name}, "empty token"},
		{"\n", []string{"auth", "set", name}, "empty token"},
		{"   \n", []string{"auth", "set", name}, "empty token"},
		{secret + "\nsecond line\n", []string{"auth", "set", name}, "more than one line"},
		{secret + "\n\n", []string{"auth", "set", name}, "more than one line"},
		{"sk-a " + secret + "\n", []string{"auth", "set", name}, "spaces or control characters"},
		{secret + "\x00\n", []string{"auth", "set", name}, "spaces or control characters"},
		{strings.Repeat("x", maxSecretBytes+1), []string{"auth", "set", name}, "more than"},
		{"", []string{"auth", "set"}, "name one PROVIDER"},
		{"", []string{"auth", "remove", secret}, "not a valid provider name"},
		{"", []string{"auth", "test", secret}, "not a valid provider name"},
		{"", []string{"auth", "test", "nosuch-provider"}, "unknown provider nosuch-provider"},
	}
	cli := &authCLI{t: t}
	for _, c := range cases {
		r := cli.expect(reason.ExitUsage, c.stdin, c.args...)
		if !strings.Contains(r.errOut+r.out, c.want) {
			t.Errorf("%q: stderr %s, want %q", c.args, r.errOut, c.want)
		}
	}
	if _, err := keychain.Get(provider.KeychainService(name), provider.KeychainUser); err == nil {
		t.Fatal("a refused set stored a token")
	}
	cli.neverShows(dir, secret)
}

// TestAuthWithoutKeychain: no Secret Service: every command refuses
// clearly with exit 2 and writes nothing anywhere.
func TestAuthWithoutKeychain(t *testing.T) {
	dir := trustHome(t)
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path="+filepath.Join(t.TempDir(), "no-bus"))
	const secret = "sk-NoKeychain-Secret"
	before := snapshot(t, dir)
	cli := &authCLI{t: t}
	for _, args := range [][]string{
		{"auth", "set", "openai"}, {"auth", "list"}, {"auth", "remove", "openai"}, {"auth", "status"},
	} {
		r := cli.expect(reason.ExitUsage, secret+"\n", args...)
		if !strings.Contains(r.errOut, "no OS keychain available") || !strings.Contains(r.errOut, "[credentials_missing]") {
			t.Errorf("%v: stderr %s", args, r.errOut)
		}
	}
	r := cli.expect(reason.ExitUsage, "", "auth", "list", "--json")
	if !strings.Contains(r.out, `"code":"credentials_missing"`) {
		t.Errorf("list --json: %s", r.out)
	}
	r = cli.expect(reason.ExitUsage, "", "auth", "status", "--json")
	var st authStatus
	if err := json.Unmarshal([]byte(r.out), &st); err != nil || st.Keychain.Available || !strings.Contains(st.Keychain.Error, "no OS keychain") {
		t.Errorf("status --json: %s (%v)", r.out, err)
	}
	r = cli.expect(authNotConfigured, "", "auth", "test", "openai", "--json")
	var res authTestResult
	if err := json.Unmarshal([]byte(r.out), &res); err != nil || res.Result != "not_configured" {
		t.Errorf("test --json: %s (%v)", r.out, err)
	}
	if after := snapshot(t, dir); after != before {
		t.Errorf("files changed without a keychain:\n%s\n---\n%s", before, after)
	}
	cli.neverShows(dir, secret)
}

// snapshot lists the files under dir with their contents.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		b.WriteString(path + "\n" + string(data) + "\n")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestAuthConfigInvalid(t *testing.T) {
	dir := trustHome(t)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"llm":{"providers":{"x":{"api":"gemini"}}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cli := &authCLI{t: t}
	for _, args := range [][]string{{"auth", "list"}, {"auth", "status"}, {"auth", "test", "openai"}} {
		r := cli.expect(reason.ExitUsage, "", args...)
		if !strings.Contains(r.errOut, "[config_invalid]") {
			t.Errorf("%v: stderr %s", args, r.errOut)
		}
	}
	// Without any config the well-known providers are still known.
	if err := os.Remove(filepath.Join(dir, "config.json")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path="+filepath.Join(t.TempDir(), "no-bus"))
	r := cli.expect(reason.ExitUsage, "", "auth", "status", "--json")
	if !strings.Contains(r.out, `"provider":"openai"`) || !strings.Contains(r.out, `"provider":"anthropic"`) {
		t.Errorf("status without config: %s", r.out)
	}
}

// openPTY opens a pseudo-terminal pair: the test types on master, the CLI
// reads slave as its stdin.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	t.Cleanup(func() { _ = m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return m, s
}

// TestAuthSetFromTerminal types the token at the prompt of a real
// pseudo-terminal: it is stored, and the terminal never echoes it.
func TestAuthSetFromTerminal(t *testing.T) {
	requireTrustKeyring(t)
	dir := trustHome(t)
	name := randomName(t, "authtty-")
	t.Cleanup(func() { _ = keychain.Delete(provider.KeychainService(name), provider.KeychainUser) })
	secret := randomName(t, "sk-Tty-")
	master, slave := openPTY(t)

	var echoed bytes.Buffer
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		_, _ = io.Copy(&echoed, master) // ends when the test closes master
	}()
	type result struct {
		code        int
		out, errOut string
	}
	done := make(chan result, 1)
	go func() {
		var out, errOut bytes.Buffer
		code := execute([]string{"auth", "set", name}, slave, &out, &errOut)
		done <- result{code, out.String(), errOut.String()}
	}()
	// Type only once echo is off, as a person would after the prompt.
	deadline := time.Now().Add(10 * time.Second)
	for {
		tio, err := unix.IoctlGetTermios(int(slave.Fd()), unix.TCGETS)
		if err != nil {
			t.Fatal(err)
		}
		if tio.Lflag&unix.ECHO == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the CLI never turned terminal echo off")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := io.WriteString(master, secret+"\n"); err != nil {
		t.Fatal(err)
	}
	var r result
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("auth set did not return")
	}
	if r.code != 0 || !strings.Contains(r.errOut, "Token for "+name+" (input hidden): ") || !strings.Contains(r.errOut, "stored the token") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", r.code, r.out, r.errOut)
	}
	if got, err := keychain.Get(provider.KeychainService(name), provider.KeychainUser); err != nil || got != secret {
		t.Fatalf("keychain holds %q, %v", got, err)
	}
	// Echo is restored afterwards.
	if tio, err := unix.IoctlGetTermios(int(slave.Fd()), unix.TCGETS); err != nil || tio.Lflag&unix.ECHO == 0 {
		t.Errorf("terminal echo not restored (%v)", err)
	}
	_ = slave.Close()
	_ = master.Close()
	<-readDone
	if strings.Contains(echoed.String(), secret) || strings.Contains(r.out+r.errOut, secret) {
		t.Fatalf("the token was echoed: terminal %q", echoed.String())
	}
	cli := &authCLI{t: t}
	cli.neverShows(dir, secret)
}
