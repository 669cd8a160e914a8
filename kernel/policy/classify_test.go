package policy

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// Tool names shaped like those of AgentNode's published packs (noun_verbal
// capability names, verb-first names) and the verbs AgentNode's SDK
// classifies, each with the action type its words give.
func TestClassifyNameWords(t *testing.T) {
	cases := map[string]Action{
		// noun first, the verb made a noun last
		"web_search": Read, "semantic_search": Read, "academic_research": Read, "browser_navigation": Read,
		"citation_extraction": Read, "security_scanner": Read, "dependency_audit": Read, "website_monitor": Read,
		"code_analysis": Compute, "document_parsing": Compute, "chart_generation": Compute, "sql_generation": Compute,
		"data_cleaning": Compute, "tone_adjustment": Compute, "document_summary": Compute, "json_processing": Compute,
		"statistics_analysis": Compute, "crm_enrichment": Compute, "report_generator": Compute, "project_planner": Compute,
		"blog_writer": WriteLocal, "test_writer": WriteLocal,
		"deployment": WriteExternal,
		// verb first
		"search_web": Read, "extract_webpage": Read, "extract_pdf_text": Read, "get_links": Read,
		"describe_csv": Read, "head_csv": Read, "screenshot": Read,
		"filter_csv": Compute, "format_sql": Compute, "generate_sql": Compute,
		"click": WriteExternal, "fill": WriteExternal,
		// the SDK's verbs
		"fetch_page": Read, "search_docs": Read, "save_note": WriteLocal, "count_words": Compute,
		"purge_cache": Delete, "invoke_lambda": Execute, "calculate_tax": Compute, "describe_table": Read,
		"publish_post": WriteExternal, "query_db": Read, "lookup_user": Read, "upload_file": WriteExternal,
		"download_report": WriteLocal, "export_csv": WriteLocal, "notify_team": WriteExternal, "convert_units": Compute,
		"validate_schema": Compute, "summarize_text": Compute, "translate_text": Compute, "erase_disk": Delete,
		"spawn_worker": Execute, "launch_job": Execute, "install_package": Execute, "sync_calendar": WriteExternal,
		// a first word that is a noun as often as a verb gives way to a known last word
		"email_summary": Compute, "email_drafting": Compute, "email_triage": Compute, "email_user": WriteExternal,
		"post_message": WriteExternal, "message_count": Compute, "mail": WriteExternal,
		// delete and secret words decide wherever they are
		"list_and_purge": Delete, "safe_delete": Delete, "get_then_remove": Delete, "cleanup": Delete,
		"get_secret": CredentialUse, "rotate_password": CredentialUse, "read_credentials": CredentialUse,
		// the first known word in between
		"csv_head_tool": Read, "my_fetch_helper": Read,
		// case and separators
		"getHTTPStatus": Read, "HTTPGet": Read, "dropTable": Delete, "DELETE_ALL": Delete, "Web-Search": Read,
		"pdf.extract": Read, "sendEmail2": WriteExternal, "données_search": Read,
		// nothing known
		"ci_cd": Unknown, "task_management": Unknown, "columns_csv": Unknown, "undelete": Unknown,
		"frobnicate": Unknown, "": Unknown, "_-.": Unknown, "de": Unknown,
		strings.Repeat("search", 10):        Unknown, // one 60-byte word
		strings.Repeat("x", 40) + "_search": Read,
	}
	for name, want := range cases {
		if got := ClassifyName(name); got != want {
			t.Errorf("ClassifyName(%q) = %s, want %s", name, got, want)
		}
		if got := Classify(ClassifyInput{ToolName: name}); !reflect.DeepEqual(got, []Action{want}) {
			t.Errorf("Classify(%q) = %v, want [%s]", name, got, want)
		}
	}
}

// A tool whose package declares network, filesystem and code execution all
// none is compute whatever its name; anything else (a level, or a level
// the caller did not give) leaves the name to decide, and a declared
// action_type always wins.
func TestClassifyNoPermissionsIsCompute(t *testing.T) {
	none := func(name string) ClassifyInput {
		return ClassifyInput{ToolName: name, NetworkLevel: "none", FilesystemLevel: "none", CodeExecutionLevel: "none"}
	}
	cases := []struct {
		in   ClassifyInput
		want []Action
	}{
		{none("delete_everything"), []Action{Compute}},
		{none("task_management"), []Action{Compute}},
		{none("send_email"), []Action{Compute}},
		{func() ClassifyInput { in := none("get_inbox"); in.Connector = true; return in }(), []Action{Compute, CredentialUse}},
		{func() ClassifyInput { in := none("x"); in.DeclaredAction = "delete"; return in }(), []Action{Delete}},
		{func() ClassifyInput { in := none("x"); in.DeclaredAction = "bogus"; return in }(), []Action{"bogus"}},
		{func() ClassifyInput { in := none("delete_everything"); in.FilesystemLevel = "temp"; return in }(), []Action{Delete}},
		{func() ClassifyInput { in := none("delete_everything"); in.FilesystemLevel = ""; return in }(), []Action{Delete}},
		{func() ClassifyInput { in := none("web_search"); in.NetworkLevel = "restricted"; return in }(), []Action{NetworkEgress, Read}},
		{func() ClassifyInput { in := none("code_analysis"); in.CodeExecutionLevel = "shell"; return in }(), []Action{Compute, Execute}},
	}
	for _, c := range cases {
		if got := Classify(c.in); !reflect.DeepEqual(got, c.want) {
			t.Errorf("Classify(%+v) = %v, want %v", c.in, got, c.want)
		}
	}
	// Under the default policy, a package without permissions runs without
	// a prompt, however its tools are named.
	for _, name := range []string{"delete_everything", "task_management", "frobnicate"} {
		d := Decide(Input{Package: "p", Tool: name, TrustLevel: "verified", Actions: Classify(none(name)),
			Permissions: Permissions{Network: "none", Filesystem: "none", CodeExecution: "none"}})
		if d.Verdict != Allow {
			t.Errorf("%s: %s (%s), want allow", name, d.Verdict, d.Reason())
		}
	}
}

func TestClassifyNameDoesNotAllocate(t *testing.T) {
	for _, name := range []string{"getHTTPStatus", "email_summary", strings.Repeat("x", 100) + "_search"} {
		if n := testing.AllocsPerRun(100, func() { ClassifyName(name) }); n != 0 {
			t.Errorf("ClassifyName(%q): %.1f allocations", name, n)
		}
	}
}

// FuzzClassifyName: any name gives one of the action types, and the same
// one for its words written in any case with any separator.
func FuzzClassifyName(f *testing.F) {
	for _, s := range []string{"web_search", "getHTTPStatus", "email_summary", "list_and_purge", "ß_ÄB", "a\x00b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		a := ClassifyName(name)
		if bit(a) == bitInvalid {
			t.Fatalf("ClassifyName(%q) = %q", name, a)
		}
		var parts []string
		ws := words{name: name}
		for w, ok := ws.next(); ok; w, ok = ws.next() {
			parts = append(parts, string(w))
		}
		if again := ClassifyName(strings.ToUpper(strings.Join(parts, "-"))); again != a && !slices.Contains(parts, "") {
			t.Fatalf("ClassifyName(%q) = %s, but %s for its words %q", name, a, again, parts)
		}
	})
}
