package policy

import (
	"fmt"
	"strings"
)

// Action is an action type (the guard.<action> keys of specs/config.md).
type Action string

// The action types.
const (
	Read          Action = "read"
	Compute       Action = "compute"
	WriteLocal    Action = "write_local"
	WriteExternal Action = "write_external"
	Delete        Action = "delete"
	Execute       Action = "execute"
	CredentialUse Action = "credential_use"
	NetworkEgress Action = "network_egress"
	Unknown       Action = "unknown"
)

// Actions lists every action type.
var Actions = []Action{Read, Compute, WriteLocal, WriteExternal, Delete, Execute, CredentialUse, NetworkEgress, Unknown}

// Bit positions of the action types in an ActionSet; the order is that of
// Actions. bitInvalid marks an action string that is none of them.
const (
	bitRead = iota
	bitCompute
	bitWriteLocal
	bitWriteExternal
	bitDelete
	bitExecute
	bitCredentialUse
	bitNetworkEgress
	bitUnknown
	numActions
	bitInvalid = 15
)

// ActionSet is a set of action types as a bitset.
type ActionSet uint16

// highRisk are the action types that count as high risk (risk score and
// environment escalation).
const highRisk = ActionSet(1<<bitDelete | 1<<bitWriteExternal | 1<<bitExecute | 1<<bitCredentialUse)

// bit returns the bit of a, or bitInvalid.
func bit(a Action) uint {
	switch a {
	case Read:
		return bitRead
	case Compute:
		return bitCompute
	case WriteLocal:
		return bitWriteLocal
	case WriteExternal:
		return bitWriteExternal
	case Delete:
		return bitDelete
	case Execute:
		return bitExecute
	case CredentialUse:
		return bitCredentialUse
	case NetworkEgress:
		return bitNetworkEgress
	case Unknown:
		return bitUnknown
	}
	return bitInvalid
}

// SetOf returns the set of actions. A string that is not an action type
// puts the set's invalid marker (see ActionSet.Invalid).
func SetOf(actions []Action) ActionSet {
	var s ActionSet
	for _, a := range actions {
		s |= 1 << bit(a)
	}
	return s
}

// Has reports whether a is in s.
func (s ActionSet) Has(a Action) bool {
	b := bit(a)
	return b != bitInvalid && s&(1<<b) != 0
}

// Invalid reports whether s was built from a string that is not an action
// type.
func (s ActionSet) Invalid() bool { return s&(1<<bitInvalid) != 0 }

// List returns the valid actions of s in name order.
func (s ActionSet) List() []Action {
	var out []Action
	for _, a := range sortedActions {
		if s.Has(a) {
			out = append(out, a)
		}
	}
	return out
}

// String lists the actions of s in name order, comma separated.
func (s ActionSet) String() string {
	var b strings.Builder
	for _, a := range sortedActions {
		if s.Has(a) {
			if b.Len() > 0 {
				b.WriteString(", ")
			}
			b.WriteString(string(a))
		}
	}
	if s.Invalid() {
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(invalid)")
	}
	return b.String()
}

// sortedActions is Actions in name order (Classify's output order).
var sortedActions = []Action{Compute, CredentialUse, Delete, Execute, NetworkEgress, Read, Unknown, WriteExternal, WriteLocal}

// Verdict is a Guard decision.
type Verdict string

// Verdicts, weakest first.
const (
	Allow  Verdict = "allow"
	Prompt Verdict = "prompt"
	Deny   Verdict = "deny"
)

// Stronger returns the stricter of a and b (deny > prompt > allow; anything
// unrecognised counts as deny).
func Stronger(a, b Verdict) Verdict {
	if rank(a) >= rank(b) {
		return a
	}
	return b
}

func rank(v Verdict) int {
	switch v {
	case Allow:
		return 0
	case Prompt:
		return 1
	}
	return 2 // deny and anything unrecognised
}

// ParseVerdict accepts allow, prompt or deny.
func ParseVerdict(s string) (Verdict, error) {
	switch v := Verdict(s); v {
	case Allow, Prompt, Deny:
		return v, nil
	}
	return "", fmt.Errorf("invalid verdict %q (want allow, prompt or deny)", s)
}

// ClassifyInput is what classification looks at.
type ClassifyInput struct {
	ToolName           string
	DeclaredAction     string // the tool's action_type, may be empty
	NetworkLevel       string // none | restricted | unrestricted
	FilesystemLevel    string // none | temp | workspace_read | workspace_write | any
	CodeExecutionLevel string // none or empty means no code execution
	Connector          bool   // the package declares a connector
}

// Classify returns the action types of a tool call, sorted by name and
// unique. The declared action_type wins; else a tool whose package declares
// network, filesystem and code_execution all "none" is compute (it can
// reach nothing a name could warn about: no network, no file of the user,
// no program); else the name decides (ClassifyName). A declared string that
// is not an action type is kept as it is, and Decide denies it. Declared
// network adds network_egress, declared code execution adds execute, a
// connector adds credential_use.
func Classify(in ClassifyInput) []Action {
	var s ActionSet
	var invalid Action
	switch {
	case in.DeclaredAction == "":
		if in.NetworkLevel == "none" && in.FilesystemLevel == "none" && in.CodeExecutionLevel == "none" {
			s |= 1 << bitCompute
		} else {
			s |= 1 << bit(ClassifyName(in.ToolName))
		}
	case bit(Action(in.DeclaredAction)) == bitInvalid:
		invalid = Action(in.DeclaredAction)
	default:
		s |= 1 << bit(Action(in.DeclaredAction))
	}
	if in.NetworkLevel != "" && in.NetworkLevel != "none" {
		s |= 1 << bitNetworkEgress
	}
	if in.CodeExecutionLevel != "" && in.CodeExecutionLevel != "none" {
		s |= 1 << bitExecute
	}
	if in.Connector {
		s |= 1 << bitCredentialUse
	}
	out := s.List()
	if invalid != "" {
		out = append(out, invalid)
	}
	return out
}

// ClassifyName is the action type a tool's name suggests. The name is cut
// into lower-case words at _ - . and spaces and at camelCase humps
// ("getHTTPStatus": get, http, status), and the words are looked up in
// nameWords, which holds verbs and the nouns made from them ("search",
// "analysis", "parsing", "generator"). In this order:
//
//  1. a word that deletes (delete, remove, purge, …) anywhere: delete;
//  2. a word about secrets (credential, password, login, …) anywhere:
//     credential_use;
//  3. the first word (verb-first names: search_web, send_email), unless it
//     is a noun as often as a verb (email, mail, message, post) and the last
//     word is known (email_summary is compute, email_user write_external);
//  4. the last word (noun-first names: web_search, code_analysis);
//  5. the first known word in between;
//  6. else unknown.
func ClassifyName(name string) Action {
	var (
		n                                int
		first, last, middle              Action
		firstKnown, firstNoun, lastKnown bool
		del, secret                      bool
	)
	ws := words{name: name}
	for word, ok := ws.next(); ok; word, ok = ws.next() {
		a, known := nameWords[string(word)] // string(bytes) as a map index does not allocate
		del = del || a == Delete
		secret = secret || secretWords[string(word)]
		n++
		if n == 1 {
			first, firstKnown, firstNoun = a, known, nounVerbs[string(word)]
			continue
		}
		if n >= 3 && lastKnown && middle == "" {
			middle = last // the previous word is in between
		}
		last, lastKnown = a, known
	}
	switch {
	case del:
		return Delete
	case secret:
		return CredentialUse
	case firstKnown && !(firstNoun && lastKnown):
		return first
	case lastKnown:
		return last
	case middle != "":
		return middle
	}
	return Unknown
}

// maxWord bounds a word's length; a longer word is not looked up.
const maxWord = 32

// words cuts a name into lower-case words at bytes other than ASCII
// letters and digits and at camelCase humps (aB, 1B, and the last capital
// of ABc).
type words struct {
	name string
	i    int
	buf  [maxWord]byte
}

// next returns the next word, valid until the following call; a word
// longer than maxWord is returned empty (it counts as a word and matches
// nothing).
func (w *words) next() ([]byte, bool) {
	n, long, started := 0, false, false
	for ; w.i < len(w.name); w.i++ {
		c := w.name[w.i]
		upper := isUpper(c)
		if !upper && !('a' <= c && c <= 'z') && !('0' <= c && c <= '9') {
			if started {
				break
			}
			continue
		}
		if started && upper && (!isUpper(w.name[w.i-1]) || w.i+1 < len(w.name) && 'a' <= w.name[w.i+1] && w.name[w.i+1] <= 'z') {
			break // a hump: c starts the next word
		}
		started = true
		if upper {
			c += 'a' - 'A'
		}
		if n == len(w.buf) {
			long = true
			continue
		}
		w.buf[n] = c
		n++
	}
	if long {
		n = 0
	}
	return w.buf[:n], started
}

func isUpper(c byte) bool { return 'A' <= c && c <= 'Z' }

// nounVerbs are first words that name a thing as often as an action.
var nounVerbs = map[string]bool{"email": true, "mail": true, "message": true, "post": true}

// secretWords make a name credential_use wherever they are in it (as
// nameWords' delete words make it delete).
var secretWords = map[string]bool{
	"credential": true, "credentials": true, "secret": true, "secrets": true, "password": true, "passwords": true,
	"passphrase": true, "keychain": true, "keyring": true, "login": true, "logon": true, "signin": true,
	"authenticate": true, "authentication": true, "authorize": true, "oauth": true,
}

// nameWords maps the words of tool names to action types: verbs (as in
// fetch_page, purge_cache) and the nouns made from them (as in web_search,
// code_analysis).
var nameWords = func() map[string]Action {
	m := map[string]Action{}
	add := func(a Action, words string) {
		for _, w := range strings.Fields(words) {
			if _, dup := m[w]; dup {
				panic("policy: name word listed twice: " + w)
			}
			m[w] = a
		}
	}
	add(Delete, `delete deletion remove removal drop purge destroy erase wipe truncate unlink rm del
		clear cleanup prune flush revoke uninstall`)
	add(Execute, `run runner exec execute execution executor eval shell invoke invocation spawn launch launcher
		start restart kill terminate command cmd script bash install installer compile`)
	add(WriteExternal, `send sender post email mail message publish publisher publishing notify notification notifier
		share tweet upload uploader submit submission deploy deployment deployer push reply forward invite
		broadcast comment sms schedule scheduling order purchase pay transfer subscribe unsubscribe sync
		click fill`)
	add(WriteLocal, `create creation creator write writer save update set add insert put edit editor modify append
		rename move copy store record make mkdir touch patch replace upsert export exporter download
		downloader commit archive zip unzip cache`)
	add(Read, `get read reader list fetch fetcher search searcher find finder query lookup look show view viewer
		describe inspect inspector browse retrieve retrieval load open scan scanner check checker head tail
		peek preview explore discover locate monitor monitoring poll screenshot status info stat exists
		navigate navigation research researcher crawl crawler scrape scraper extract extraction extractor
		audit auditor investigate investigator intel intelligence watch`)
	add(Compute, `compute computation calculate calculation calculator calc count counter sum tally parse
		parsing parser analyze analyse analysis analyzer analyser analyst analytics convert conversion
		converter transform transformation format formatting formatter validate validation validator
		verify verification summarize summarise summary summarizer summarization translate translation
		translator generate generation generator classify classification classifier detect detection
		detector compare comparison diff sort filter split tokenize tokenization embed embedding
		embeddings render rendering estimate estimation score scoring rank ranking match matching
		normalize normalization clean cleaning cleaner encode encoding decode decoding hash hashing
		aggregate aggregation lint linting linter predict prediction recommend recommendation plan
		planning planner solve simulate simulation review reviewer grade explain rewrite paraphrase
		adjust adjustment draft drafting compose outline suggest optimize infer compress decompress
		chart plot visualize visualization process processing processor enrich enrichment triage
		digest report design prep preparation statistics stats`)
	return m
}()
