# Used by the runtime: python scripts (testdata/script/python_*.txtar,
# attack/python_*.txtar) as $PYCHECK, with the packages of sdk/python/testdata
# copied into the script's directory.
# pycheck.py PLACEMENT: runs each case through `agentnode run --json` (it
# must run with placement PLACEMENT, on the configured backend) and
# directly (the function imported and called in Python as AgentNode's SDK
# does: the same sys.path, func(**input), a coroutine awaited, the SDK's
# fallback for a result JSON cannot hold, "Type: message" for anything
# raised) and requires the same response.
import json, os, subprocess, sys

DIRECT = r'''
import asyncio, importlib, json, os, site, sys
pack, module, name, inp = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
if os.path.isdir(os.path.join(pack, "src")):
    sys.path.append(os.path.join(pack, "src"))
sys.path.append(pack)
if os.path.isdir(os.path.join(pack, ".deps")):
    site.addsitedir(os.path.join(pack, ".deps"))
out = os.dup(1)
os.dup2(2, 1)
try:
    result = getattr(importlib.import_module(module), name)(**inp)
    if asyncio.iscoroutine(result):
        result = asyncio.run(result)
    try:
        resp = json.dumps({"ok": True, "result": result}, allow_nan=False)
    except (TypeError, ValueError):
        resp = json.dumps({"ok": True, "result": {"__agentnode_fallback_repr__": True, "repr": repr(result)[:2000]}})
except BaseException as e:
    resp = json.dumps({"ok": False, "error": type(e).__name__ + ": " + str(e)})
os.write(out, (resp + "\n").encode())
'''

CASES = [
    ("probe-pack", "word_count", "probe_pack.tool:word_count", {"text": "one three fives"}),
    ("probe-pack", "slow_echo", "probe_pack.tool:slow_echo", {"value": {"k": [1, "\u00e9", None]}, "delay": 0.01}),
    ("probe-pack", "chatty", "probe_pack.tool:chatty", {"n": 2}),
    ("probe-pack", "explode", "probe_pack.tool:explode", {"message": "bad \"input\" \u2603"}),
    ("probe-pack", "stamp", "probe_pack.tool:stamp", {}),
    ("probe-pack", "tags", "probe_pack.tool:tags", {}),
    ("probe-pack", "broken", "probe_pack.broken:run", {}),
    ("probe-pack", "word_count", "probe_pack.tool:word_count", {"text": "a", "extra": 1}),
    ("flat-notes-pack", "format_note", "flat_notes_pack.tool:format_note", {"title": "Hello World"}),
]


def direct(pack, entrypoint, inp):
    """The response the function gives called directly (DIRECT)."""
    module, name = entrypoint.split(":")
    d = subprocess.run(["/usr/bin/python3", "-I", "-S", "-B", "-c", DIRECT, os.path.abspath(pack), module, name,
                        json.dumps(inp)], capture_output=True, text=True, check=True)
    return json.loads(d.stdout)


def canon(resp):
    return json.dumps({k: resp.get(k) for k in ("ok", "result", "error")}, sort_keys=True)


if sys.argv[1] == "--direct":
    # pycheck.py --direct PACK MODULE:FUNCTION INPUT: print the direct
    # call's response, canonical (for the Go tests).
    print(canon(direct(sys.argv[2], sys.argv[3], json.loads(sys.argv[4]))))
    sys.exit(0)

backend = None
for pkg, tool, ep, inp in CASES:
    r = subprocess.run(["agentnode", "run", pkg, tool, "--input", json.dumps(inp), "--json"],
                       capture_output=True, text=True)
    got = json.loads(r.stdout)
    if got.get("placement") != sys.argv[1] or not got.get("ran"):
        sys.exit("%s/%s did not run with placement %s: %s %s" % (pkg, tool, sys.argv[1], r.stdout, r.stderr))
    backend = got.get("backend", "the host")
    want_exit = 0 if got["ok"] else 1
    if r.returncode != want_exit:
        sys.exit("%s/%s exited %d: %s" % (pkg, tool, r.returncode, r.stderr))
    want = direct(pkg, ep, inp)
    if canon(got) != canon(want):
        sys.exit("%s/%s %s:\n agentnode: %s\n direct:    %s" % (pkg, tool, inp, canon(got), canon(want)))
print("same: %d cases on %s" % (len(CASES), backend))
