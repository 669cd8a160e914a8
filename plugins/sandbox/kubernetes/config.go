package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// ErrConfig is wrapped by every error about the plugin's configuration.
var ErrConfig = errors.New("kubernetes backend configuration")

// Config is sandbox.kubernetes.*: which cluster, namespace and node class
// runs the pods. It is read from <binary>.json (configFor).
type Config struct {
	// Kubeconfig is the absolute path of the kubeconfig file (required).
	Kubeconfig string `json:"kubeconfig"`
	// Context is the kubeconfig context; empty: its current context.
	Context string `json:"context,omitempty"`
	// Namespace the pods run in; empty: "default".
	Namespace string `json:"namespace,omitempty"`
	// RuntimeClass is the pods' runtimeClassName (gVisor, Kata...); empty: none.
	RuntimeClass string `json:"runtime_class,omitempty"`
	// NodeSelector is the pods' nodeSelector.
	NodeSelector map[string]string `json:"node_selector,omitempty"`
}

// configFor reads <exe>.json. The file must be a regular file owned by
// root or by this user and writable by no one else (it decides where the
// host's packages go); anything else is an error, never a default.
func configFor(exe string) (*Config, error) {
	if exe == "" {
		return nil, fmt.Errorf("%w: cannot locate the plugin binary", ErrConfig)
	}
	path := exe + ".json"
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	switch {
	case !st.Mode().IsRegular():
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrConfig, path)
	case !ok || (sys.Uid != 0 && int(sys.Uid) != os.Getuid()):
		return nil, fmt.Errorf("%w: %s must be owned by root or by this user", ErrConfig, path)
	case st.Mode().Perm()&0o022 != 0:
		return nil, fmt.Errorf("%w: %s is writable by group or others", ErrConfig, path)
	}
	var c Config
	dec := json.NewDecoder(f)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrConfig, path, err)
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// parseConfig is configFor's decoding alone (tests).
func parseConfig(b []byte) (*Config, error) {
	var c Config
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return &c, c.validate()
}

func (c *Config) validate() error {
	if !filepath.IsAbs(c.Kubeconfig) {
		return fmt.Errorf("%w: kubeconfig must be an absolute path", ErrConfig)
	}
	if c.Namespace == "" {
		c.Namespace = "default"
	}
	if errs := validation.IsDNS1123Label(c.Namespace); len(errs) > 0 {
		return fmt.Errorf("%w: namespace %q: %v", ErrConfig, c.Namespace, errs)
	}
	if c.RuntimeClass != "" {
		if errs := validation.IsDNS1123Subdomain(c.RuntimeClass); len(errs) > 0 {
			return fmt.Errorf("%w: runtime_class %q: %v", ErrConfig, c.RuntimeClass, errs)
		}
	}
	for k, v := range c.NodeSelector {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return fmt.Errorf("%w: node_selector key %q: %v", ErrConfig, k, errs)
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return fmt.Errorf("%w: node_selector %q value %q: %v", ErrConfig, k, v, errs)
		}
	}
	return nil
}

// restConfig loads the kubeconfig's chosen context. The result holds the
// credentials: it is used for API calls and never logged or passed on.
func (c *Config) restConfig() (*rest.Config, error) {
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: c.Kubeconfig}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: c.Context})
	rc, err := cc.ClientConfig()
	if err != nil {
		// clientcmd's errors name files and contexts, not secrets.
		return nil, fmt.Errorf("%w: kubeconfig: %w", ErrConfig, err)
	}
	rc.UserAgent = "agentnode-sandbox-kubernetes/" + version
	return rc, nil
}
