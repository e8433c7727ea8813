#!/usr/bin/env python3
"""test_embed_lua.py -- what tools/embed_lua.py refuses, and how it orders what it takes.

Runs the embedder, as the build does, on the small trees under tests/tools/embed_lua/:
an include cycle and an include of an unknown name must fail (non-zero exit, a message
naming the files), as must an include of a library the build did not list, a library
using a name of a library it does not include and a library no script includes; a diamond (top includes left and right, both include
base) must give base once, before left and right, and the script last.
"""
import glob
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
EMBED = os.path.join(ROOT, 'tools', 'embed_lua.py')


def run_embed(tree, leave_out=()):
    """Runs embed_lua.py on every .lua file of tree but those named in leave_out (as
    meson would: OUTPUT, SELF, files); returns (exit status, stderr, the C file written
    or None)."""
    files = sorted(f for f in glob.glob(os.path.join(tree, '*.lua')) +
                   glob.glob(os.path.join(tree, 'lib', '*.lua'))
                   if os.path.basename(f) not in leave_out)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, 'out.c')
        p = subprocess.run([sys.executable, EMBED, out, EMBED] + files, capture_output=True,
                           text=True)
        c = None
        if os.path.exists(out):
            with open(out, encoding='utf-8') as f:
                c = f.read()
        return p.returncode, p.stderr, c


def fixture(name):
    return os.path.join(HERE, 'embed_lua', name)


class Refusals(unittest.TestCase):
    def assert_refused(self, name, *words):
        rc, err, c = run_embed(fixture(name))
        self.assertNotEqual(rc, 0, 'embed_lua.py took the %s tree' % name)
        self.assertIsNone(c, 'a refused tree must leave no output')
        for w in words:
            self.assertIn(w, err)
        return err

    def test_cycle(self):
        err = self.assert_refused('cycle', 'include cycle')
        self.assertIn('lib/a.lua -> ', err)
        self.assertIn('lib/b.lua -> ', err)
        self.assertIn('lib/c.lua -> ', err)

    def test_unknown_name(self):
        self.assert_refused('unknown', 'unknown/lib/a.lua includes "missing"',
                            'no file of lib/')

    def test_library_not_given(self):
        rc, err, c = run_embed(fixture('diamond'), leave_out=('base.lua',))
        self.assertNotEqual(rc, 0)
        self.assertIsNone(c)
        self.assertIn('diamond/lib/base.lua is not among the files given', err)

    def test_use_without_include(self):
        self.assert_refused('undeclared', 'undeclared/lib/a.lua uses b_value',
                            'undeclared/lib/b.lua')

    def test_library_no_script_includes(self):
        self.assert_refused('unused', 'included by no script', 'unused/lib/a.lua')

    def test_missing_include_line(self):
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, 'script.lua'), 'w', encoding='utf-8') as f:
                f.write('return 1\n')
            rc, err, _ = run_embed(tmp)
            self.assertNotEqual(rc, 0)
            self.assertIn('script.lua: the first line must be "-- include: NAME..."', err)


class Diamond(unittest.TestCase):
    def test_each_library_once_in_order(self):
        rc, err, c = run_embed(fixture('diamond'))
        self.assertEqual(rc, 0, err)
        marks = ['local BASE = 10', 'local function left_value', 'local function right_value',
                 'local function top_value', 'return top_value()']
        at = [c.find(m) for m in marks]
        self.assertNotIn(-1, at, c)
        self.assertEqual(at, sorted(at), 'base, left, right, top, then the script')
        self.assertEqual(c.count('local BASE = 10'), 1)
        self.assertNotIn('-- include:', c)
        self.assertIn('const unsigned store_lua_nscripts = 1;', c)


if __name__ == '__main__':
    unittest.main()
