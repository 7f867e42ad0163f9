"""clang's JSON AST of cugraphs' headers, for the tools that read it (split-definitions,
check-lambda-captures). Needs clang++ on PATH."""
import json
import os
import pathlib
import subprocess

ROOT = pathlib.Path(__file__).resolve().parent.parent


def public_headers_tu(include):
    """A translation unit of every public header clang can parse as host code (the detail
    headers come through them)."""
    return "\n".join(f"#include <cugraphs/{p.name}>" for p in sorted((pathlib.Path(include) / "cugraphs").glob("*.hpp"))
                     if p.name not in {"device_dispatch.hpp", "nccl.hpp"}) + "\n"


def ast(include, cuda_include="/usr/local/cuda/include", tu=None):
    """The top-level declarations of namespace cugraphs, as JSON nodes; raises on a failed parse."""
    cmd = ["clang++", "-std=c++20", "-x", "c++", f"-I{include}", f"-I{cuda_include}", "-fsyntax-only",
           "-Xclang", "-ast-dump=json", "-Xclang", "-ast-dump-filter=cugraphs", "-"]
    # Meson's test runner sets MALLOC_PERTURB_, which makes clang 14's JSON dumper crash now
    # and then (seen with 77 and 209): it is meant for the programs under test, not for clang.
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_PERTURB_"}
    # clang 14's JSON dumper also crashes (SIGSEGV, exit 139) on some runs without it, about
    # one in three on the same input: a crash is tried again, a parse error is not.
    for _ in range(5):
        out = subprocess.run(cmd, input=tu or public_headers_tu(include), capture_output=True, text=True, cwd=ROOT,
                             env=env)
        if out.returncode not in (139, -11) and "exit code 139" not in out.stderr:
            break
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-3000:])
    dec = json.JSONDecoder()
    text, pos, nodes = out.stdout, 0, []
    while True:
        while pos < len(text) and text[pos] != "{":
            pos += 1
        if pos >= len(text):
            return nodes
        node, pos = dec.raw_decode(text, pos)
        nodes.append(node)


class Files:
    """clang's JSON names a location's file only where it changes: follow it in dump order.
    Paths under `root` are kept relative to it."""

    def __init__(self, root=ROOT):
        self.current = None
        self.root = str(root)

    def see(self, loc):
        if not isinstance(loc, dict):
            return
        if "spellingLoc" in loc or "expansionLoc" in loc:
            for k in ("spellingLoc", "expansionLoc"):
                self.see(loc.get(k))
            return
        if "file" in loc:
            f = loc["file"]
            self.current = f[len(self.root) + 1:] if f.startswith(self.root + "/") else f


def walk(node, files, visit, chain):
    """Calls visit(node, ancestors, file where the node begins) on every node, in dump order."""
    files.see(node.get("loc"))
    rng = node.get("range", {})
    files.see(rng.get("begin"))
    start_file = files.current
    visit(node, chain, start_file)
    for child in node.get("inner", []) or []:
        walk(child, files, visit, chain + [node])
    files.see(rng.get("end"))
