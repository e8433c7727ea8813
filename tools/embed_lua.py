#!/usr/bin/env python3
"""Writes a C file holding each Lua script as a string, for engine/store/store_lua.h.

Usage: embed_lua.py OUTPUT.c SELF.py FILE.lua...   (SELF is skipped: meson passes every
input). A FILE in a folder named lib is a library; any other is a script. Redis Lua has
no module system, so the scripts share helpers by text: the first line of every file
names the libraries it uses,

    -- include: prelude events finish

(by the stem of their file; none after the colon for a library that uses none), and a
script's text is the libraries it includes, directly or through others, each once and
each after the ones it includes, then the script. A library whose code uses a name
another library defines must include that library: the build fails when one does not
(see undeclared_uses), when the includes form a cycle, name no library, or a library is
included by no script, naming the files.

A script whose second line starts with "-- batched" becomes a function that run_batch
(lib/batch.lua) calls once per item of a batch; one whose second line starts with
"-- gathered" runs within run_gathered (lib/gather.lua: its writes to keys every job
shares are sent together at its end); any other starts with shift_common_args
(lib/prelude.lua).
"""
import os
import re
import sys

INCLUDE_LINE = re.compile(r'^-- include:((?: +[a-z][a-z0-9_]*)*) *$')


class EmbedError(Exception):
    """A refusal: the message names the files."""


class LuaFile:
    def __init__(self, path, text):
        self.path = path
        self.name = os.path.splitext(os.path.basename(path))[0]
        self.is_lib = os.path.basename(os.path.dirname(os.path.abspath(path))) == 'lib'
        first, _, self.body = text.partition('\n')
        m = INCLUDE_LINE.match(first)
        if not m:
            raise EmbedError('%s: the first line must be "-- include: NAME..." (the libraries '
                             'of lib/ it uses, or none), not %r' % (path, first))
        self.includes = m.group(1).split()


def c_string(text):
    out = []
    for line in text.splitlines(keepends=True):
        esc = line.replace('\\', '\\\\').replace('"', '\\"').replace('\n', '\\n')
        out.append('    "%s"' % esc)
    return '\n'.join(out) if out else '    ""'


def wrapped_body(script):
    """A script's own part of what Redis runs, wrapped as its second line asks (see the
    module's docstring)."""
    text = script.body
    if text.startswith('-- batched'):
        # run_batch (lib/batch.lua) calls the body once per item of the batch, with the
        # item's own arguments as ARGV.
        return 'local function batch_item(ARGV)\n%s\nend\nreturn run_batch(batch_item)\n' % text
    if text.startswith('-- gathered'):
        # run_gathered (lib/gather.lua) sends the writes to shared keys at the end.
        return 'shift_common_args()\nlocal function body()\n%s\nend\nreturn run_gathered(body)\n' % text
    return 'shift_common_args()\n' + text


def closure(start, libs):
    """The libraries `start` includes, directly or not, each after the ones it includes
    (depth first, in the order the include lines name them)."""
    out, state = [], {}
    if start.is_lib:
        state[start.name] = 'open'

    def visit(f, path):
        for name in f.includes:
            lib = libs.get(name)
            if lib is None:
                lib_dir = os.path.dirname(f.path) if f.is_lib else os.path.join(
                    os.path.dirname(f.path), 'lib')
                if os.path.exists(os.path.join(lib_dir, name + '.lua')):
                    raise EmbedError('%s includes "%s": %s is not among the files given (list '
                                     'it in engine/meson.build\'s lua_scripts)' %
                                     (f.path, name, os.path.join(lib_dir, name + '.lua')))
                raise EmbedError('%s includes "%s", which is no file of lib/ (known: %s)' %
                                 (f.path, name, ' '.join(sorted(libs)) or 'none'))
            if state.get(name) == 'open':
                cycle = path[path.index(lib):] + [lib]
                raise EmbedError('include cycle: %s' % ' -> '.join(x.path for x in cycle))
            if name not in state:
                state[name] = 'open'
                visit(lib, path + [lib])
                state[name] = 'done'
                out.append(lib)

    visit(start, [start])
    return out


# What a library defines at its top level: `local function NAME` and `local A, B = ...`
# at the start of a line.
TOP_FUNCTION = re.compile(r'^local function ([A-Za-z_]\w*)', re.M)
TOP_LOCALS = re.compile(r'^local ([A-Za-z_]\w*(?:, *[A-Za-z_]\w*)*) *=', re.M)
# Names a file declares anywhere (locals, parameters, loop variables): such a name is
# its own, whatever a library calls the same.
ANY_LOCAL = re.compile(r'\blocal (?:function )?([A-Za-z_]\w*(?:, *[A-Za-z_]\w*)*)')
PARAMS = re.compile(r'\bfunction\b[^(]*\(([^)]*)\)')
FOR_VARS = re.compile(r'\bfor ([A-Za-z_]\w*(?:, *[A-Za-z_]\w*)*) +(?:in\b|=)')
NAME = re.compile(r'(?<![\w.:])([A-Za-z_]\w*)')


def code_only(text):
    """The text with its comments and string literals blanked (Lua's short forms, which
    are all the scripts use)."""
    return re.sub(r"--[^\n]*|'(?:\\.|[^'\\\n])*'|\"(?:\\.|[^\"\\\n])*\"", ' ', text)


def top_names(text):
    code = code_only(text)
    names = set(TOP_FUNCTION.findall(code))
    for group in TOP_LOCALS.findall(code):
        names.update(n.strip() for n in group.split(','))
    return names


def own_names(code):
    names = set()
    for pattern in (ANY_LOCAL, PARAMS, FOR_VARS):
        for group in pattern.findall(code):
            names.update(n.strip() for n in group.split(',') if n.strip())
    return names


def undeclared_uses(f, text, libs, defined_by):
    """The names of libraries' top levels that `text` (of file f) uses without including
    the library that defines them: [(name, library path)]. Lua sees every local defined
    above it in the concatenated text, so a library that leans on a name another script
    happened to include first would fail only in the scripts that do not."""
    available = {n for lib in closure(f, libs) for n in top_names(lib.body)}
    code = code_only(text)
    own = own_names(code)
    out = []
    for name in sorted(set(NAME.findall(code))):
        lib = defined_by.get(name)
        if lib is not None and lib is not f and name not in available and name not in own:
            out.append((name, lib.path))
    return out


def build(paths):
    """[(script name, the source Redis runs)] for the .lua files `paths`, sorted by
    name; raises EmbedError on a refusal."""
    files = []
    for path in sorted(paths):
        with open(path, encoding='utf-8') as fp:
            files.append(LuaFile(path, fp.read()))
    libs = {f.name: f for f in files if f.is_lib}
    scripts = [f for f in files if not f.is_lib]
    defined_by = {}
    for lib in libs.values():
        for name in top_names(lib.body):
            defined_by[name] = lib
    faults = []
    for f in files:
        text = wrapped_body(f) if not f.is_lib else f.body
        for name, where in undeclared_uses(f, text, libs, defined_by):
            faults.append('%s uses %s, defined in %s, which it does not include' %
                          (f.path, name, where))
    if faults:
        raise EmbedError('\n'.join(faults))
    used = {lib.name for s in scripts for lib in closure(s, libs)}
    unused = sorted(lib.path for name, lib in libs.items() if name not in used)
    if unused:
        raise EmbedError('included by no script: %s' % ' '.join(unused))
    out = []
    for s in scripts:
        parts = [lib.body for lib in closure(s, libs)] + [wrapped_body(s)]
        out.append((s.name, '\n'.join(parts)))
    return out


def main():
    output = sys.argv[1]
    try:
        named = build([p for p in sys.argv[2:] if p.endswith('.lua')])
    except EmbedError as e:
        sys.stderr.write('embed_lua.py: %s\n' % e)
        return 1
    with open(output, 'w', encoding='utf-8') as f:
        f.write('/* Generated by tools/embed_lua.py from the scripts in engine/store/lua. Do not edit. */\n')
        f.write('#include "store/store_lua.h"\n\n')
        f.write('const store_lua_script_t store_lua_scripts[] = {\n')
        for name, text in named:
            f.write('    {"%s",\n%s},\n' % (name, c_string(text)))
        f.write('};\n')
        f.write('const unsigned store_lua_nscripts = %d;\n' % len(named))
    return 0


if __name__ == '__main__':
    sys.exit(main())
