#!/usr/bin/env python3
"""remote-box's build-context hash (backends/_common.py: _context_hash),
written again in Python from its description in seeds-code.md 2.1-2.2, so
that tests/sbx-image.bats can hold sbx-image's C against it on the same
tree. Usage: ctxhash.py ROOT [DOCKERFILE]; prints the 8 hex digits."""
import fnmatch
import hashlib
import os
import posixpath
import sys

ALWAYS = {".git", ".hg", ".svn", "__pycache__", ".mypy_cache",
          ".pytest_cache", ".ruff_cache", ".tox", ".venv", "venv",
          "node_modules"}


def parse(root):
    rules = []
    try:
        text = open(os.path.join(root, ".dockerignore"), "rb").read()
    except FileNotFoundError:
        return rules
    for line in text.decode().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        neg = line.startswith("!")
        if neg:
            line = line[1:].strip()
        line = posixpath.normpath(line.strip("/")) if line.strip("/") else ""
        if line in ("", "."):
            continue
        rules.append((line.split("/"), neg))
    return rules


def segmatch(pat, parts):
    if not pat:
        return not parts
    if pat[0] == "**":
        return any(segmatch(pat[1:], parts[i:]) for i in range(len(parts) + 1))
    return bool(parts) and fnmatch.fnmatchcase(parts[0], pat[0]) and \
        segmatch(pat[1:], parts[1:])


def ignored(rules, rel):
    parts = rel.split("/")
    out = False
    for pat, neg in rules:
        if any(segmatch(pat, parts[:k]) for k in range(1, len(parts) + 1)):
            out = not neg
    return out


def context_hash(root, dockerfile):
    rules = parse(root)
    has_neg = any(neg for _, neg in rules)
    found = []
    for d, dirs, files in os.walk(root):
        reld = os.path.relpath(d, root)
        reld = "" if reld == "." else reld.replace(os.sep, "/")
        keep = []
        for n in sorted(dirs):
            r = reld + "/" + n if reld else n
            if n in ALWAYS or (not has_neg and ignored(rules, r)):
                continue
            keep.append(n)
        dirs[:] = keep
        for n in files:
            r = reld + "/" + n if reld else n
            if n == ".DS_Store" or ignored(rules, r):
                continue
            found.append((r, os.path.join(d, n)))
    h = hashlib.sha256()
    for r, p in sorted(found):
        if not os.path.isfile(p):
            continue
        h.update(r.encode())
        h.update(b"\0")
        h.update(hashlib.sha256(open(p, "rb").read()).digest())
    h.update(open(dockerfile, "rb").read())
    return h.hexdigest()[:8]


root = sys.argv[1]
print(context_hash(root, sys.argv[2] if len(sys.argv) > 2 else
                   os.path.join(root, "Dockerfile")))
