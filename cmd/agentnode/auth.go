package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/agentnode/agentnode/kernel/config"
	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/keychain"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/sdk/broker/provider"
)

func init() { register(newAuthCmd) }

// Exit codes of `auth test` (AgentNode's).
const (
	authValid         = 0
	authRejected      = 1
	authNotConfigured = 2
	authIndeterminate = 3
)

// Limits of auth commands.
const (
	maxSecretBytes  = 16 << 10
	authTestTimeout = 15 * time.Second
)

func newAuthCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "auth",
		Short: "Manage LLM provider tokens in the OS keychain",
		Long: "Provider tokens live only in the OS keychain (Secret Service on Linux), service\n" +
			"agentnode:<provider>, user token; never in a file, never on the command line.\n" +
			"Providers are the well-known openai and anthropic plus those in llm.providers of config.json.\n" +
			"There is no fallback: without a keychain these commands refuse (credentials_missing).",
	}
	cmd.AddCommand(newAuthSetCmd(), newAuthListCmd(), newAuthRemoveCmd(), newAuthStatusCmd(), newAuthTestCmd())
	return cmd
}

// providerArg checks the PROVIDER argument without echoing it: a mistyped
// command line may have put a token there.
func providerArg(args []string) (string, error) {
	if len(args) != 1 {
		return "", usageError("name one PROVIDER")
	}
	if !provider.ValidName(args[0]) {
		return "", usageError("PROVIDER is not a valid provider name (want %s); it is not shown in case it is a secret", provider.NamePattern)
	}
	return args[0], nil
}

// knownProvider is a provider auth commands know about.
type knownProvider struct {
	Name    string `json:"provider"`
	API     string `json:"api"`
	BaseURL string `json:"base_url"`
	// Source is "config" (llm.providers) or "builtin" (well-known).
	Source  string `json:"source"`
	Service string `json:"keychain_service"`
}

// knownProviders lists the providers of llm.providers and the well-known
// ones, sorted by name. A missing config only means no configured ones; an
// invalid config is an error (config_invalid).
func knownProviders() ([]knownProvider, string, error) {
	dir, err := home.Dir()
	if err != nil {
		return nil, "", &failure{exit: reason.ExitUsage, err: err}
	}
	path := home.ConfigPath(dir)
	byName := map[string]knownProvider{}
	cfg, err := config.Load(path)
	switch {
	case errors.Is(err, reason.ErrNotSetUp):
	case err != nil:
		return nil, path, err
	default:
		for name, p := range cfg.LLM.Providers {
			ep, err := provider.Resolve(name, p.API, p.BaseURL)
			if err != nil {
				return nil, path, reason.New(reason.ConfigInvalid, "%s: llm.providers.%s: %w", path, name, err)
			}
			byName[name] = knownProvider{Name: name, API: ep.API, BaseURL: ep.BaseURL, Source: "config"}
		}
	}
	for _, name := range provider.WellKnown {
		if _, ok := byName[name]; !ok {
			ep, _ := provider.Resolve(name, "", "")
			byName[name] = knownProvider{Name: name, API: ep.API, BaseURL: ep.BaseURL, Source: "builtin"}
		}
	}
	out := make([]knownProvider, 0, len(byName))
	for _, p := range byName {
		p.Service = provider.KeychainService(p.Name)
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, path, nil
}

// tokenStored reports whether the keychain holds a token for name.
func tokenStored(name string) (bool, error) {
	_, err := keychain.Get(provider.KeychainService(name), provider.KeychainUser)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, keychain.ErrNotFound):
		return false, nil
	}
	return false, err
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func newAuthSetCmd() *cobra.Command {
	var fromEnv string
	cmd := &cobra.Command{
		Use:   "set PROVIDER [--from-env VAR]",
		Short: "Store a provider token in the OS keychain (read from a TTY prompt, stdin or --from-env)",
		Long: "Stores the token of PROVIDER in the OS keychain (service agentnode:PROVIDER, user token),\n" +
			"replacing an earlier one. The token is read with echo off from the terminal, or as one line\n" +
			"from stdin when stdin is not a terminal, or from the environment variable named by --from-env.\n" +
			"It is never taken from the command line.",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageError("auth set takes only the PROVIDER: the token is read from a TTY prompt, stdin or --from-env VAR, " +
					"never from the command line (the extra arguments are not shown)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := providerArg(args)
			if err != nil {
				return err
			}
			if fromEnv != "" && !envName.MatchString(fromEnv) {
				return usageError("--from-env takes the name of an environment variable ([A-Za-z_][A-Za-z0-9_]*), " +
					"not a token (the value given is not shown)")
			}
			// Before asking for the token: without a keychain it could not be kept.
			if err := keychain.Available(); err != nil {
				return fail(cmd, false, keychainFailure(err))
			}
			secret, err := readSecret(cmd, name, fromEnv)
			if err != nil {
				return err
			}
			service := provider.KeychainService(name)
			existed, err := tokenStored(name)
			if err != nil {
				return fail(cmd, false, keychainFailure(err))
			}
			if err := keychain.Set(service, provider.KeychainUser, secret); err != nil {
				return fail(cmd, false, keychainFailure(err))
			}
			verb := "stored"
			if existed {
				verb = "replaced"
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "%s the token of %s in the OS keychain (service %s, user %s)\n",
				verb, name, service, provider.KeychainUser)
			if known, path, err := knownProviders(); err == nil && !slices.ContainsFunc(known, func(p knownProvider) bool { return p.Name == name }) {
				fmt.Fprintf(cmd.ErrOrStderr(), "note: %s is not in llm.providers of %s; add it before use, e.g.\n"+
					"  agentnode config set llm.providers.%s '{\"api\":\"openai\",\"base_url\":\"http://localhost:11434/v1\"}'\n", name, path, name)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&fromEnv, "from-env", "", "read the token from this environment variable")
	// pflag's messages quote the offending argument ("-tsk-…"): not here.
	cmd.SetFlagErrorFunc(func(*cobra.Command, error) error {
		return usageError("auth set: unknown or malformed flag (not shown, in case it holds a token); the only flag is --from-env VAR")
	})
	return cmd
}

// readSecret reads the token: from the environment variable fromEnv, else
// from the terminal with echo off, else one line from stdin. Errors never
// contain what was read.
func readSecret(cmd *cobra.Command, name, fromEnv string) (string, error) {
	var raw string
	switch in := cmd.InOrStdin(); {
	case fromEnv != "":
		raw = os.Getenv(fromEnv)
		if raw == "" {
			return "", usageError("--from-env: environment variable %s is not set or empty", fromEnv)
		}
	case isTerminal(in):
		f := in.(*os.File)
		fmt.Fprintf(cmd.ErrOrStderr(), "Token for %s (input hidden): ", name)
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(cmd.ErrOrStderr())
		if err != nil {
			return "", usageError("read the token from the terminal: %w", err)
		}
		raw = string(b)
	default:
		b, err := io.ReadAll(io.LimitReader(in, maxSecretBytes+1))
		if err != nil {
			return "", usageError("read the token from stdin: %w", err)
		}
		if len(b) > maxSecretBytes {
			return "", usageError("stdin holds more than %d bytes; give the token alone on one line", maxSecretBytes)
		}
		b = bytes.TrimSuffix(b, []byte("\n"))
		b = bytes.TrimSuffix(b, []byte("\r"))
		if bytes.ContainsAny(b, "\r\n") {
			return "", usageError("stdin holds more than one line; give the token alone on one line")
		}
		raw = string(b)
	}
	secret := strings.TrimSpace(raw)
	switch {
	case secret == "":
		return "", usageError("empty token: nothing stored (pipe the token on stdin, type it at the prompt, or use --from-env VAR)")
	case !provider.ValidSecret(secret):
		return "", usageError("the token contains spaces or control characters; nothing stored")
	}
	return secret, nil
}

func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func newAuthListCmd() *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the providers with a token in the OS keychain (never the tokens)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			known, _, err := knownProviders()
			if err != nil {
				return fail(cmd, jsonOut, err)
			}
			if err := keychain.Available(); err != nil {
				return fail(cmd, jsonOut, keychainFailure(err))
			}
			stored := []knownProvider{}
			for _, p := range known {
				ok, err := tokenStored(p.Name)
				if err != nil {
					return fail(cmd, jsonOut, keychainFailure(err))
				}
				if ok {
					stored = append(stored, p)
				}
			}
			if jsonOut {
				return writeJSON(cmd.OutOrStdout(), map[string]any{"providers": stored})
			}
			for _, p := range stored {
				fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s\n", p.Name, p.Service)
			}
			if len(stored) == 0 {
				fmt.Fprintln(cmd.ErrOrStderr(), "no provider tokens stored (agentnode auth set PROVIDER)")
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	return cmd
}

func newAuthRemoveCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "remove PROVIDER",
		Short: "Remove a provider token from the OS keychain",
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := providerArg(args)
			if err != nil {
				return err
			}
			service := provider.KeychainService(name)
			if err := keychain.Delete(service, provider.KeychainUser); err != nil {
				if errors.Is(err, keychain.ErrNotFound) {
					err = reason.New(reason.CredentialsMissing, "no token stored for %s (service %s)", name, service)
				}
				return fail(cmd, false, keychainFailure(err))
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "removed the token of %s from the OS keychain (service %s)\n", name, service)
			return nil
		},
	}
}

type authStatus struct {
	Keychain struct {
		Available bool   `json:"available"`
		Error     string `json:"error,omitempty"`
	} `json:"keychain"`
	Config    string               `json:"config"`
	Providers []authProviderStatus `json:"providers"`
}

type authProviderStatus struct {
	knownProvider
	// Configured: a token is stored.
	Configured bool `json:"configured"`
}

func newAuthStatusCmd() *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show whether the keychain is reachable and which providers have a token (exit 2 without a keychain)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			known, path, err := knownProviders()
			if err != nil {
				return fail(cmd, jsonOut, err)
			}
			var st authStatus
			st.Config = path
			kerr := keychain.Available()
			st.Keychain.Available = kerr == nil
			if kerr != nil {
				st.Keychain.Error = kerr.Error()
			}
			for _, p := range known {
				ps := authProviderStatus{knownProvider: p}
				if kerr == nil {
					if ps.Configured, err = tokenStored(p.Name); err != nil {
						return fail(cmd, jsonOut, keychainFailure(err))
					}
				}
				st.Providers = append(st.Providers, ps)
			}
			if jsonOut {
				if err := writeJSON(cmd.OutOrStdout(), st); err != nil {
					return err
				}
			} else {
				printAuthStatus(cmd.OutOrStdout(), &st)
			}
			if kerr != nil {
				if !jsonOut {
					fmt.Fprintf(cmd.ErrOrStderr(), "agentnode: %v [%s]\n", kerr, reason.CredentialsMissing)
				}
				return exitWith(reason.ExitUsage)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	return cmd
}

func printAuthStatus(w io.Writer, st *authStatus) {
	if st.Keychain.Available {
		fmt.Fprintln(w, "keychain: available")
	} else {
		fmt.Fprintln(w, "keychain: unavailable")
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROVIDER\tAPI\tSOURCE\tTOKEN\tBASE URL")
	for _, p := range st.Providers {
		token := "no"
		switch {
		case !st.Keychain.Available:
			token = "?"
		case p.Configured:
			token = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.Name, p.API, p.Source, token, p.BaseURL)
	}
	_ = tw.Flush()
}

// authTestResult is the outcome of `auth test`.
type authTestResult struct {
	Provider   string `json:"provider"`
	Result     string `json:"result"` // valid | rejected | not_configured | indeterminate
	HTTPStatus int    `json:"http_status,omitempty"`
	URL        string `json:"url,omitempty"`
	Detail     string `json:"detail,omitempty"`
}

func newAuthTestCmd() *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "test PROVIDER",
		Short: "Check the stored token with one cheap authenticated request (exit 0 valid, 1 rejected, 2 not configured, 3 indeterminate)",
		Long: "Sends one request that needs the token and costs nothing (GET the model list) to the provider's\n" +
			"base URL. Exit 0: the provider accepted the token; 1: it rejected it (HTTP 401/403); 2: no token\n" +
			"stored, no keychain, or an unknown provider; 3: indeterminate (unreachable, or another status).\n" +
			"Nothing the provider answers is printed.",
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := providerArg(args)
			if err != nil {
				return err
			}
			known, path, err := knownProviders()
			if err != nil {
				return fail(cmd, jsonOut, err)
			}
			i := slices.IndexFunc(known, func(p knownProvider) bool { return p.Name == name })
			if i < 0 {
				return fail(cmd, jsonOut, usageError("unknown provider %s: it is not in llm.providers of %s and not one of %s",
					name, path, strings.Join(provider.WellKnown, ", ")))
			}
			p := known[i]
			res := authTest(cmd.Context(), p)
			if jsonOut {
				if err := writeJSON(cmd.OutOrStdout(), res); err != nil {
					return err
				}
			} else {
				line := name + ": " + strings.ReplaceAll(res.Result, "_", " ")
				if res.HTTPStatus != 0 {
					line += fmt.Sprintf(" (HTTP %d from %s)", res.HTTPStatus, res.URL)
				}
				if res.Detail != "" {
					line += ": " + res.Detail
				}
				fmt.Fprintln(cmd.OutOrStdout(), line)
			}
			switch res.Result {
			case "valid":
				return nil
			case "rejected":
				return exitWith(authRejected)
			case "not_configured":
				return exitWith(authNotConfigured)
			}
			return exitWith(authIndeterminate)
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	return cmd
}

// authTest makes the request of `auth test`. The token goes only into the
// provider's auth header; the reply body is never read.
func authTest(ctx context.Context, p knownProvider) authTestResult {
	res := authTestResult{Provider: p.Name}
	notConfigured := func(format string, args ...any) authTestResult {
		res.Result, res.Detail = "not_configured", fmt.Sprintf(format, args...)
		return res
	}
	if err := keychain.Available(); err != nil {
		return notConfigured("%v", err)
	}
	token, err := keychain.Get(p.Service, provider.KeychainUser)
	switch {
	case errors.Is(err, keychain.ErrNotFound):
		return notConfigured("no token stored (service %s); run `agentnode auth set %s`", p.Service, p.Name)
	case err != nil:
		return notConfigured("%v", err)
	case !provider.ValidSecret(token):
		return notConfigured("the stored token is not usable (spaces or control characters); store it again with `agentnode auth set %s`", p.Name)
	}
	ep := provider.Endpoint{Name: p.Name, API: p.API, BaseURL: p.BaseURL}
	res.URL = ep.ModelsURL()
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, authTestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, res.URL, nil)
	if err != nil {
		res.Result, res.Detail = "indeterminate", "cannot build the request"
		return res
	}
	req.Header.Set("Accept", "application/json")
	ep.Authorize(req.Header, token)
	client := &http.Client{
		Transport:     &http.Transport{Proxy: http.ProxyFromEnvironment, TLSHandshakeTimeout: 10 * time.Second},
		CheckRedirect: provider.NoRedirect,
	}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		res.Result, res.Detail = "indeterminate", "provider unreachable: "+provider.TransportFailure(err)
		return res
	}
	resp.Body.Close()
	res.HTTPStatus = resp.StatusCode
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		res.Result = "valid"
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		res.Result = "rejected"
	default:
		res.Result = "indeterminate"
	}
	return res
}
