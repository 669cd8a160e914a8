package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/spf13/cobra"

	"github.com/agentnode/agentnode/cmd/agentnode/configedit"
	"github.com/agentnode/agentnode/kernel/bounded"
	"github.com/agentnode/agentnode/kernel/config"
	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/keychain"
	"github.com/agentnode/agentnode/kernel/manifest"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/kernel/store"
	"github.com/agentnode/agentnode/sdk/trust/attestation"
)

func init() { register(newTrustCmd) }

func newTrustCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "trust",
		Short: "Manage trust signing keys and sign attestations",
		Long: "Trust signing keys are Ed25519 key pairs. The private key lives only in the OS keychain\n" +
			"(service agentnode-trust:<id>); the public key is pinned in trust.keys of config.json.\n" +
			"Attestations are described in specs/attestation.md.",
	}
	cmd.AddCommand(newTrustKeygenCmd(), newTrustAttestCmd())
	return cmd
}

// keychainFailure turns a keychain error into an exit-2 failure carrying
// credentials_missing.
func keychainFailure(err error) error {
	if reason.CodeOf(err) == "" {
		err = reason.Wrap(reason.CredentialsMissing, err, "")
	}
	return &failure{exit: reason.ExitUsage, err: err}
}

type keygenResult struct {
	ID              string `json:"id"`
	PublicKey       string `json:"public_key"`
	KeychainService string `json:"keychain_service"`
	Config          string `json:"config"`
}

func newTrustKeygenCmd() *cobra.Command {
	var (
		id      string
		jsonOut bool
	)
	cmd := &cobra.Command{
		Use:   "keygen --id ID",
		Short: "Create an Ed25519 signing key: private key into the OS keychain, public key into trust.keys",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := attestation.ValidateIssuer(id); err != nil {
				return fail(cmd, jsonOut, usageError("--id: %w", err))
			}
			dir, err := home.Dir()
			if err != nil {
				return fail(cmd, jsonOut, &failure{exit: reason.ExitUsage, err: err})
			}
			cfgPath := home.ConfigPath(dir)
			// Check the config first so a broken setup touches no keychain.
			cfg, err := config.Load(cfgPath)
			if err != nil {
				return fail(cmd, jsonOut, err)
			}
			for _, k := range cfg.Trust.Keys {
				if k.ID == id {
					return fail(cmd, jsonOut, usageError("trust key %q is already pinned in %s; choose another id", id, cfgPath))
				}
			}
			if err := keychain.Available(); err != nil {
				return fail(cmd, jsonOut, keychainFailure(err))
			}
			service := trustKeyService(id)
			switch _, err := trustKey(id); {
			case err == nil:
				return fail(cmd, jsonOut, usageError("a trust signing key %q already exists in the OS keychain (service %s); choose another id", id, service))
			case !errors.Is(err, keychain.ErrNotFound):
				return fail(cmd, jsonOut, keychainFailure(err))
			}
			pub, priv, err := ed25519.GenerateKey(rand.Reader)
			if err != nil {
				return fail(cmd, jsonOut, fmt.Errorf("generate Ed25519 key: %w", err))
			}
			if err := setTrustKey(id, priv); err != nil {
				return fail(cmd, jsonOut, keychainFailure(err))
			}
			pubB64 := base64.StdEncoding.EncodeToString(pub)
			if err := configedit.AddTrustKey(cfgPath, id, pubB64); err != nil {
				// Roll back so that the id can be used again.
				if derr := keychain.Delete(service, trustKeyUser); derr != nil {
					err = fmt.Errorf("%w (and removing the new private key from the OS keychain failed: %v)", err, derr)
				}
				return fail(cmd, jsonOut, err)
			}
			res := keygenResult{ID: id, PublicKey: pubB64, KeychainService: service, Config: cfgPath}
			if jsonOut {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "id: %s\npublic_key: %s\n", res.ID, res.PublicKey)
			fmt.Fprintf(cmd.ErrOrStderr(), "private key stored in the OS keychain (service %s, user %s); public key pinned in %s\n",
				service, trustKeyUser, cfgPath)
			return nil
		},
	}
	cmd.Flags().StringVar(&id, "id", "", "id of the new key (issuer name in attestations)")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	_ = cmd.MarkFlagRequired("id")
	return cmd
}

// packageHeader is the part of agentnode.yaml an attestation needs.
type packageHeader struct {
	PackageID string `yaml:"package_id"`
	Version   string `yaml:"version"`
}

// maxManifestSize bounds the agentnode.yaml read by trust attest.
const maxManifestSize = 1 << 20

func readPackageHeader(dir string) (packageHeader, error) {
	path := filepath.Join(dir, "agentnode.yaml")
	data, err := bounded.ReadFile(path, maxManifestSize)
	if err != nil {
		return packageHeader{}, fmt.Errorf("read package manifest: %w", err)
	}
	// The YAML decoder recurses: bound the document first, as Load does.
	if _, err := bounded.YAML(data, bounded.YAMLLimits{MaxDepth: manifest.MaxDepth, MaxTokens: manifest.MaxTokens}); err != nil {
		return packageHeader{}, fmt.Errorf("parse %s: %w", path, err)
	}
	var h packageHeader
	if err := yaml.Unmarshal(data, &h); err != nil {
		return packageHeader{}, fmt.Errorf("parse %s: %w", path, err)
	}
	if h.PackageID == "" {
		return packageHeader{}, fmt.Errorf("%s: package_id is missing", path)
	}
	if h.Version == "" {
		return packageHeader{}, fmt.Errorf("%s: version is missing", path)
	}
	return h, nil
}

// parseValidity parses --expires: a Go duration ("720h", "90m") or a whole
// number of days ("90d"), positive and at most 100 years.
func parseValidity(s string) (time.Duration, error) {
	const maxDays = 36500
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n <= 0 || n > maxDays {
			return 0, fmt.Errorf("--expires %q: want a whole number of days from 1 to %d, like 90d", s, maxDays)
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("--expires %q: want a duration like 90d or 720h", s)
		}
	}
	if d < time.Second || d > maxDays*24*time.Hour {
		return 0, fmt.Errorf("--expires %q: must be between 1s and %d days", s, maxDays)
	}
	return d, nil
}

func newTrustAttestCmd() *cobra.Command {
	var (
		level, keyID, expires, wantVersion string
		jsonOut                            bool
	)
	cmd := &cobra.Command{
		Use:   "attest PATH --level L --key ID [--expires D] [--version V]",
		Short: "Sign an attestation for the package directory PATH and print it",
		Long: "Sign an attestation that the package in directory PATH (its agentnode.yaml's package_id and\n" +
			"version, and the content hash of the directory) has trust level L, with the signing key ID from\n" +
			"the OS keychain. The attestation JSON goes to stdout; install it with\n" +
			"agentnode install PATH --attestation FILE.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			if err := attestation.ValidateLevel(level); err != nil {
				return fail(cmd, jsonOut, usageError("--level: %q is not one of unverified, verified, trusted, curated", level))
			}
			if err := attestation.ValidateIssuer(keyID); err != nil {
				return fail(cmd, jsonOut, usageError("--key: %w", err))
			}
			validity, err := parseValidity(expires)
			if err != nil {
				return fail(cmd, jsonOut, usageError("%w", err))
			}
			if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
				return fail(cmd, jsonOut, usageError("%s is not a package directory", dir))
			}
			hdr, err := readPackageHeader(dir)
			if err != nil {
				return fail(cmd, jsonOut, usageError("%w", err))
			}
			if wantVersion != "" && wantVersion != hdr.Version {
				return fail(cmd, jsonOut, usageError("--version %s does not match version %s in %s", wantVersion, hdr.Version, filepath.Join(dir, "agentnode.yaml")))
			}
			hash, err := store.ContentHash(dir)
			if err != nil {
				return fail(cmd, jsonOut, &failure{exit: reason.ExitUsage, err: fmt.Errorf("hash %s: %w", dir, err)})
			}
			if err := keychain.Available(); err != nil {
				return fail(cmd, jsonOut, keychainFailure(err))
			}
			priv, err := trustKey(keyID)
			if errors.Is(err, keychain.ErrNotFound) {
				err = reason.New(reason.CredentialsMissing,
					"no trust signing key %q in the OS keychain (service %s); create one with agentnode trust keygen --id %s",
					keyID, trustKeyService(keyID), keyID)
			}
			if err != nil {
				return fail(cmd, jsonOut, keychainFailure(err))
			}
			now := time.Now().UTC().Truncate(time.Second)
			a, err := attestation.Sign(attestation.Attestation{
				PackageID:    hdr.PackageID,
				Version:      hdr.Version,
				ArtifactHash: hash,
				TrustLevel:   level,
				Issuer:       keyID,
				IssuedAt:     now,
				ExpiresAt:    now.Add(validity),
			}, priv)
			if err != nil {
				return fail(cmd, jsonOut, usageError("%w", err))
			}
			doc, err := json.Marshal(a)
			if err != nil {
				return fail(cmd, jsonOut, err)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\n", doc)
			return err
		},
	}
	cmd.Flags().StringVar(&level, "level", "", "trust level: unverified, verified, trusted or curated")
	cmd.Flags().StringVar(&keyID, "key", "", "id of the signing key in the OS keychain")
	cmd.Flags().StringVar(&expires, "expires", "365d", "validity from now: days (90d) or a duration (720h)")
	cmd.Flags().StringVar(&wantVersion, "version", "", "refuse unless agentnode.yaml has this version")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print errors as JSON (the attestation is always JSON)")
	_ = cmd.MarkFlagRequired("level")
	_ = cmd.MarkFlagRequired("key")
	return cmd
}
