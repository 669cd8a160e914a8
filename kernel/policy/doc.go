// Package policy is Guard's decision engine. It makes no I/O: rate limits,
// inspector plugins and the prompt itself are separate pipeline stages in
// kernel/dispatch, which feeds Decide and acts on its verdict.
//
// Classify turns a tool into action types (AgentNode's Guard classes, the guard.<action> keys of specs/config.md): the
// tool's declared action_type; else compute when the package declares
// network, filesystem and code execution all none; else the words of the
// tool's name (ClassifyName, specs/manifest.md "Classification of tools").
// A declared network adds network_egress, declared code execution adds
// execute, a declared connector adds credential_use.
//
// Decide applies, in this order, and the first step that decides wins:
//
//  1. Internal errors deny: no action type, an action type the engine does
//     not know, an unknown permission level. Nothing lifts them.
//  2. Critical risk (score ≥ 71, see Risk) always denies; no override,
//     pre-approval or global setting lifts it.
//  3. Permission ceilings: a declared network, filesystem or code execution
//     level above the ceiling in Input.Ceiling denies. Nothing lifts it.
//     dispatch passes guard.max_permissions, lowered by the AgentNode SDK's
//     permissions.* deny (specs/config.md).
//  4. The per-tool override (guard.tool_overrides, "PKG/TOOL"), ignored in
//     strict mode. An override is final: it is the user's decision for that
//     one tool, so environment escalation does not change it. In the
//     AgentNode SDK's object form (Input.ActionOverrides) it is a verdict
//     per action type: each action type of the call that has one takes it,
//     above the global policy and any pre-approval, and is left out of
//     environment escalation; the call's other action types go on through
//     steps 5 and 6, and the strictest verdict over all of them wins. When
//     every action type of the call has its override, the call is decided
//     as by a single verdict (no escalation, no permission prompt).
//  5. Agent pre-approved actions (Input.PreApproved: the calling agent's
//     guard.agent_overrides entry, or for an agent's call_llm the run's
//     opt-in): each pre-approved action type that the global policy would
//     prompt for is allowed instead. A pre-approval never lifts a deny, and
//     strict mode ignores pre-approvals as it ignores overrides.
//  6. The global policy: guard.<action> from the config over the default
//     table, or the strict table (guard.strict / AGENTNODE_GUARD_STRICT=1,
//     where the config's per-action settings are ignored too); the strictest
//     verdict over all action types of the call wins.
//
// Environment escalation (ours; AgentNode has only the +15 risk for secrets
// with network egress): after steps 5 and 6, an allow becomes prompt when
// the call has a high-risk action type (delete, write_external, execute,
// credential_use) and the risk band is high, or agentnode runs as root, or
// secrets are present in the environment while the tool has network egress.
// Last, an allow becomes prompt when a declared permission level is above
// Input.PromptCeiling (the AgentNode SDK's permissions.* prompt and
// sandboxed); a tool override, which returns earlier, is not raised.
// Escalation only ever turns allow into prompt; non-interactive runs (CI,
// AGENTNODE_NON_INTERACTIVE, no TTY) then deny with policy_prompt.
//
// Adding action types to a call never weakens a deny: the risk score only
// grows, the global verdict is the strictest over the actions, and a
// pre-approval never lifts a deny (FuzzDecide checks this).
//
// Decide does not allocate: actions are a bitset, the override key is built
// in a stack buffer, and the human-readable reason is built only when
// Decision.Reason is called.
//
// It is in the trusted core because it is Guard's decision.
package policy
